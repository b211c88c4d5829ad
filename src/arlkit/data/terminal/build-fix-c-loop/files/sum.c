#include <stdio.h>

int main(void) {
    int v[5] = {1, 2, 3, 4, 5};
    int s = 0;
    for (int i = 1; i < 5; i++) s += v[i];
    printf("%d\n", s);
    return 0;
}
