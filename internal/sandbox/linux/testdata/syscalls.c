// syscalls makes system calls a sandbox must refuse through ABIs other than
// native x86_64, where a seccomp filter that only knows x86_64 numbers would
// be bypassed. isolation_test.go compiles it with gcc -static and runs it
// inside a computer.
//
//   syscalls native   getpid through the normal x86_64 ABI (control: must work)
//   syscalls int80    getpid through the i386 ABI (int $0x80): must be killed
//   syscalls x32      getpid through the x32 ABI (nr | 0x40000000): must be killed
//
// It prints what happened when it survives; a sandbox kills it with SIGSYS
// before it can print anything for int80 and x32.
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/syscall.h>

static long int80(long nr) {
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr) : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

static long x32(long nr) {
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr | 0x40000000L) : "memory", "rcx", "r11");
	return ret;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: syscalls native|int80|x32\n");
		return 2;
	}
	if (strcmp(argv[1], "native") == 0) {
		printf("native getpid=%ld\n", syscall(SYS_getpid));
		return 0;
	}
	if (strcmp(argv[1], "int80") == 0) {
		long r = int80(20); /* __NR_getpid on i386 */
		printf("int80 getpid returned %ld\n", r);
		return 1;
	}
	if (strcmp(argv[1], "x32") == 0) {
		long r = x32(39); /* __NR_getpid on x86_64, with the x32 bit */
		printf("x32 getpid returned %ld\n", r);
		return 1;
	}
	fprintf(stderr, "unknown mode %s\n", argv[1]);
	return 2;
}
