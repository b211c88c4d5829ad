#include <stdio.h>
int answer(void);
int main(void) { printf("%d\n", answer()); return 0; }
