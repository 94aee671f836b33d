/*
 * Before main: whether this CPU has the instruction-set extensions the build enabled (the
 * workspace builds for x86-64-v3, `.cargo/config.toml`). Compiled for baseline x86-64 (build.rs
 * passes -march=x86-64 and one GROUPER_NEED_<X> per enabled extension), so that it runs where
 * the Rust code would stop at its first AVX2 or BMI2 instruction with SIGILL and no word why;
 * it prints one line naming the missing extensions and how to rebuild, and exits with 2 as
 * every grouper error does. GROUPER_CPU_ASSUME_MISSING=<name> treats one as missing (tests).
 */
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum reg { EAX, EBX, ECX, EDX };

static int has(unsigned leaf, unsigned sub, enum reg reg, unsigned bit) {
    unsigned r[4] = {0, 0, 0, 0};
    if (__get_cpuid_max(leaf & 0x80000000u, 0) < leaf) {
        return 0;
    }
    __cpuid_count(leaf, sub, r[EAX], r[EBX], r[ECX], r[EDX]);
    return (r[reg] >> bit) & 1u;
}

/* Whether the operating system saves the AVX registers (XCR0 bits 1 and 2). */
static int os_saves_avx(void) {
    unsigned lo, hi;
    if (!has(1, 0, ECX, 27)) { /* OSXSAVE */
        return 0;
    }
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6u) == 6u;
}

static void say(const char *s) {
    ssize_t ignored = write(2, s, strlen(s));
    (void)ignored;
}

__attribute__((constructor)) static void grouper_cpu_check(void) {
    const char *missing[24];
    int n = 0;
    const char *pretend = getenv("GROUPER_CPU_ASSUME_MISSING");
#define NEED(name, ok)                                                                           \
    if (!(ok) || (pretend != NULL && strcmp(pretend, name) == 0)) {                              \
        missing[n++] = name;                                                                     \
    }
#ifdef GROUPER_NEED_SSE3
    NEED("sse3", has(1, 0, ECX, 0))
#endif
#ifdef GROUPER_NEED_SSSE3
    NEED("ssse3", has(1, 0, ECX, 9))
#endif
#ifdef GROUPER_NEED_FMA
    NEED("fma", has(1, 0, ECX, 12) && os_saves_avx())
#endif
#ifdef GROUPER_NEED_CMPXCHG16B
    NEED("cmpxchg16b", has(1, 0, ECX, 13))
#endif
#ifdef GROUPER_NEED_SSE4_1
    NEED("sse4.1", has(1, 0, ECX, 19))
#endif
#ifdef GROUPER_NEED_SSE4_2
    NEED("sse4.2", has(1, 0, ECX, 20))
#endif
#ifdef GROUPER_NEED_MOVBE
    NEED("movbe", has(1, 0, ECX, 22))
#endif
#ifdef GROUPER_NEED_POPCNT
    NEED("popcnt", has(1, 0, ECX, 23))
#endif
#ifdef GROUPER_NEED_XSAVE
    NEED("xsave", has(1, 0, ECX, 26))
#endif
#ifdef GROUPER_NEED_AVX
    NEED("avx", has(1, 0, ECX, 28) && os_saves_avx())
#endif
#ifdef GROUPER_NEED_F16C
    NEED("f16c", has(1, 0, ECX, 29))
#endif
#ifdef GROUPER_NEED_BMI1
    NEED("bmi1", has(7, 0, EBX, 3))
#endif
#ifdef GROUPER_NEED_AVX2
    NEED("avx2", has(7, 0, EBX, 5) && os_saves_avx())
#endif
#ifdef GROUPER_NEED_BMI2
    NEED("bmi2", has(7, 0, EBX, 8))
#endif
#ifdef GROUPER_NEED_LZCNT
    NEED("lzcnt", has(0x80000001u, 0, ECX, 5))
#endif
#undef NEED
    if (n == 0) {
        return;
    }
    say("error: this grouper was built for CPUs with ");
    for (int i = 0; i < n; i++) {
        say(i ? ", " : "");
        say(missing[i]);
    }
    say(", which this one lacks; build it for this CPU with "
        "RUSTFLAGS=\"-C target-cpu=native\" cargo build --release\n");
    _exit(2);
}
