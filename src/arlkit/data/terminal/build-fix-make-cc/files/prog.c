#include <stdio.h>
int main(void) { puts("ready"); return 0; }
