/* What a line untouched for a while costs to read again on this machine,
 * with 4 KiB and with 2 MiB pages (BENCHMARKS.md, "The low-latency
 * mode's floor"). The thread spins between rounds, as a low-latency
 * camera thread does: nothing sleeps, and still the lines go cold.
 *
 *   cc -O2 -o cold_lines docs/probes/cold_lines.c
 *   ./cold_lines GAP_NS HUGE(0|1) READS      e.g. ./cold_lines 33000000 0 16
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s GAP_NS HUGE(0|1) READS\n", argv[0]);
        return 2;
    }
    long gap = atol(argv[1]);
    int huge = atoi(argv[2]), reads = atoi(argv[3]);
    if (reads < 1 || reads > 256) {
        fprintf(stderr, "READS must be 1..256\n");
        return 2;
    }
    enum { ROUNDS = 200 };
    size_t size = 8 << 20, align = 2 << 20;
    char *map = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    char *buf = (char *)(((unsigned long)map + align - 1) & ~(align - 1));
    madvise(buf, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(buf, 1, size);
    long took[ROUNDS];
    volatile long sink = 0;
    for (int r = 0; r < ROUNDS; r++) {
        long due = now_ns() + gap;
        while (now_ns() < due) {
        }
        long a = now_ns();
        /* One line on each of `reads` distinct 4 KiB pages, 28 KiB apart. */
        for (int p = 0; p < reads; p++)
            sink += buf[(size_t)p * 7 * 4096 + 64 * (p % 64)];
        took[r] = now_ns() - a;
    }
    qsort(took, ROUNDS, sizeof took[0], by_value);
    printf("gap %ld us, %s pages, %d reads: P50 %ld ns, P90 %ld ns\n", gap / 1000,
           huge ? "2 MiB" : "4 KiB", reads, took[ROUNDS / 2], took[ROUNDS * 9 / 10]);
    return 0;
}
