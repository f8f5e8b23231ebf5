# Hostile probes run inside a computer by isolation_test.go and
# limits_test.go, with /usr/bin/python3 (which has ctypes).
#
# Usage: python3 probe.py NAME [NAME...]
# Prints one JSON object mapping each probe NAME (a key of PROBES) to its
# outcome: "ok" (or "ok:<detail>") when the operation succeeded, else the
# errno name ("EPERM"...) or another short failure description.
#
# Long-running helpers, each alone on the command line:
#   probe.py abstract_listen     listen on an abstract unix socket forever
#   probe.py inotify_exhaust     take every inotify instance of the uid, hold them
#   probe.py count_procs SECS    print the most processes seen during SECS
import ctypes
import errno
import json
import os
import socket
import stat
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def errname(e):
    return errno.errorcode.get(e, "errno%d" % e)


def sysc(nr, *args):
    """Raw syscall; returns "ok:<ret>" or the errno name."""
    ctypes.set_errno(0)
    conv = []
    for a in args:
        if isinstance(a, int):
            conv.append(ctypes.c_long(a))
        else:
            conv.append(a)
    r = libc.syscall(ctypes.c_long(nr), *conv)
    if r == -1:
        return errname(ctypes.get_errno())
    return "ok:%d" % r


def oserr(fn):
    """Runs fn; "ok[:detail]" on success, the errno name on OSError."""
    try:
        r = fn()
    except OSError as e:
        return errname(e.errno) if e.errno else type(e).__name__
    return "ok" if r is None else "ok:%s" % (r,)


def connect(family, addr, kind=socket.SOCK_STREAM):
    def f():
        s = socket.socket(family, kind)
        s.settimeout(2)
        try:
            if kind == socket.SOCK_DGRAM:
                s.sendto(b"x", addr)
            else:
                s.connect(addr)
        finally:
            s.close()
    return oserr(f)


def open_socket(family, kind, proto=0):
    def f():
        socket.socket(family, kind, proto).close()
    return oserr(f)


def write_file(path):
    def f():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"x")
        os.close(fd)
    return oserr(f)


def read_len(path):
    def f():
        with open(path, "rb") as fh:
            return len(fh.read(1 << 20))
    return oserr(f)


def loopback():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    c = socket.create_connection(srv.getsockname(), timeout=2)
    a, _ = srv.accept()
    c.sendall(b"ping")
    got = a.recv(4)
    for s in (a, c, srv):
        s.close()
    return got.decode()


def dns():
    try:
        socket.getaddrinfo("example.com", 80)
    except socket.gaierror as e:
        return "gaierror"
    except OSError as e:
        return errname(e.errno)
    return "ok"


def interfaces():
    names = sorted(n for _, n in socket.if_nameindex())
    return "ok:" + ",".join(names)


def proc_net_dev():
    with open("/proc/net/dev") as fh:
        lines = fh.read().splitlines()[2:]
    return "ok:" + ",".join(sorted(l.split(":")[0].strip() for l in lines))


def unix_sockets():
    # Unix sockets of this network namespace, other than the header.
    with open("/proc/net/unix") as fh:
        return "ok:%d" % (len(fh.read().splitlines()) - 1)


def visible_processes():
    me = os.getpid()
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
            st = os.stat("/proc/" + p)
        except OSError:
            continue
        out.append("%s%s uid=%d %s" % (p, "(self)" if int(p) == me else "", st.st_uid, cmd))
    return "ok:" + " | ".join(sorted(out))


def socket_fds():
    # Every socket descriptor of every process this one can see.
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % p)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink("/proc/%s/fd/%s" % (p, fd))
            except OSError:
                continue
            if target.startswith("socket:"):
                found.append("%s/%s" % (p, fd))
    return "ok:%d" % len(found)


def socket_files():
    # Socket files anywhere but /proc and the host's read-only /usr.
    found = []
    for top in os.listdir("/"):
        path = "/" + top
        if top in ("proc", "usr") or os.path.islink(path):
            continue
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                try:
                    if stat.S_ISSOCK(os.lstat(os.path.join(root, name)).st_mode):
                        found.append(os.path.join(root, name))
                except OSError:
                    pass
    return "ok:%d" % len(found)


def loop_devices():
    return "ok:%d" % len([d for d in os.listdir("/dev") if d.startswith("loop")])


def status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            k, _, v = line.partition(":")
            if k == field:
                return "ok:" + v.strip()
    return "missing"


def ptrace_attach(pid):
    ctypes.set_errno(0)
    r = libc.ptrace(ctypes.c_long(16), ctypes.c_long(pid), None, None)  # PTRACE_ATTACH
    return "ok" if r == 0 else errname(ctypes.get_errno())


class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def process_vm_readv(pid):
    buf = ctypes.create_string_buffer(8)
    local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
    remote = iovec(0x400000, 8)
    return sysc(310, pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)


def libc_call(name, *args):
    def f():
        ctypes.set_errno(0)
        r = getattr(libc, name)(*args)
        if r != 0:
            raise OSError(ctypes.get_errno(), name)
    return oserr(f)


def setns_own_net():
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        return sysc(308, fd, 0)
    finally:
        os.close(fd)


def shm_create():
    libc.shmget.restype = ctypes.c_int
    r = libc.shmget(0xC0B1C1E, 4096, 0o1000 | 0o666)  # IPC_CREAT
    return "ok" if r >= 0 else errname(ctypes.get_errno())


def shm_find():
    r = libc.shmget(0xC0B1C1E, 0, 0)
    return "ok" if r >= 0 else errname(ctypes.get_errno())


def abstract_connect():
    def f():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect("\0cubicle-isolation-test")
        finally:
            s.close()
    return oserr(f)


def abstract_listen():
    # Listens forever (run it in the background).
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0cubicle-isolation-test")
    s.listen(8)
    print("listening", flush=True)
    while True:
        c, _ = s.accept()
        c.close()


def inotify_init():
    fd = libc.inotify_init1(0o2000000)  # IN_CLOEXEC
    if fd < 0:
        return errname(ctypes.get_errno())
    os.close(fd)
    return "ok"


def inotify_exhaust():
    # Takes every inotify instance this uid may have, then holds them until
    # killed (run it in the background).
    fds = []
    while True:
        fd = libc.inotify_init1(0o2000000)
        if fd < 0:
            break
        fds.append(fd)
    print("exhausted %d %s" % (len(fds), errname(ctypes.get_errno())), flush=True)
    while True:
        time.sleep(3600)


def pidfd(pid, then):
    fd = sysc(434, pid, 0)  # pidfd_open
    if not fd.startswith("ok:"):
        return "pidfd_open:" + fd
    fd = int(fd[3:])
    try:
        return then(fd)
    finally:
        os.close(fd)


def count_procs(seconds):
    # Samples how many processes this one can see (itself included) and
    # prints the largest count; "counting" first, once it samples.
    print("counting", flush=True)
    end = time.monotonic() + seconds
    most, samples = 0, 0
    while time.monotonic() < end:
        most = max(most, sum(1 for p in os.listdir("/proc") if p.isdigit()))
        samples += 1
        time.sleep(0.002)
    print("max %d samples %d" % (most, samples), flush=True)


def mknod_char():
    return oserr(lambda: os.mknod("/tmp/probe-null", 0o666 | stat.S_IFCHR, os.makedev(1, 3)))


def mount_tmpfs():
    os.makedirs("/tmp/probe-mnt", exist_ok=True)
    return libc_call("mount", b"x", b"/tmp/probe-mnt", b"tmpfs", ctypes.c_ulong(0), None)


AF_VSOCK, AF_ALG = 40, 38
IORING_SETUP, CLONE3, BPF = 425, 435, 321

PROBES = {
    # network
    "interfaces": interfaces,
    "proc_net_dev": proc_net_dev,
    "loopback": lambda: oserr(loopback),
    "tcp_gateway": lambda: connect(socket.AF_INET, ("10.0.2.2", 80)),
    "tcp_internet": lambda: connect(socket.AF_INET, ("1.1.1.1", 80)),
    "udp_dns": lambda: connect(socket.AF_INET, ("8.8.8.8", 53), socket.SOCK_DGRAM),
    "tcp6_internet": lambda: connect(socket.AF_INET6, ("2606:4700:4700::1111", 80, 0, 0)),
    "dns": dns,
    "vsock": lambda: open_socket(AF_VSOCK, socket.SOCK_STREAM),
    "vsock_dgram": lambda: open_socket(AF_VSOCK, socket.SOCK_DGRAM),
    "packet_raw": lambda: open_socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)),
    "inet_raw": lambda: open_socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    "alg": lambda: open_socket(AF_ALG, socket.SOCK_SEQPACKET),
    "unix_sockets": unix_sockets,
    # processes and the agent
    "visible_processes": visible_processes,
    "stat_pid1": lambda: oserr(lambda: os.stat("/proc/1") and None),
    "list_pid1_fds": lambda: oserr(lambda: os.listdir("/proc/1/fd") and None),
    "read_pid1_environ": lambda: read_len("/proc/1/environ"),
    "kill0_pid1": lambda: oserr(lambda: os.kill(1, 0)),
    "kill9_pid1": lambda: oserr(lambda: os.kill(1, 9)),
    "ptrace_pid1": lambda: ptrace_attach(1),
    "process_vm_readv_pid1": lambda: process_vm_readv(1),
    "pidfd_getfd_pid1": lambda: pidfd(1, lambda fd: sysc(438, fd, 3, 0)),
    "pidfd_kill_pid1": lambda: pidfd(1, lambda fd: sysc(424, fd, 9, None, 0)),
    "socket_fds": socket_fds,
    "socket_files": socket_files,
    # privileges
    "CapInh": lambda: status("CapInh"),
    "CapPrm": lambda: status("CapPrm"),
    "CapEff": lambda: status("CapEff"),
    "CapBnd": lambda: status("CapBnd"),
    "CapAmb": lambda: status("CapAmb"),
    "NoNewPrivs": lambda: status("NoNewPrivs"),
    "Seccomp": lambda: status("Seccomp"),
    "setuid0": lambda: oserr(lambda: os.setuid(0)),
    "setgid0": lambda: oserr(lambda: os.setgid(0)),
    "setresuid0": lambda: oserr(lambda: os.setresuid(0, 0, 0)),
    "setgroups0": lambda: oserr(lambda: os.setgroups([0])),
    "mount_tmpfs": mount_tmpfs,
    "remount_root_rw": lambda: libc_call("mount", None, b"/", None, ctypes.c_ulong(32), None),  # MS_REMOUNT
    "umount_proc_keys": lambda: libc_call("umount2", b"/proc/keys", 2),  # MNT_DETACH
    "chroot": lambda: libc_call("chroot", b"/tmp"),
    "pivot_root": lambda: sysc(155, b"/tmp", b"/tmp"),
    "unshare_user": lambda: sysc(272, 0x10000000),
    "unshare_net": lambda: sysc(272, 0x40000000),
    "unshare_mnt": lambda: sysc(272, 0x00020000),
    "setns_net": setns_own_net,
    "bpf": lambda: sysc(BPF, 0, None, 0),
    "io_uring_setup": lambda: sysc(IORING_SETUP, 1, None),
    "clone3": lambda: sysc(CLONE3, None, 0),
    "mknod_char": mknod_char,
    "init_module": lambda: sysc(175, None, 0, b""),
    "finit_module": lambda: sysc(313, 0, b"", 0),
    "kexec_load": lambda: sysc(246, 0, 0, None, 0),
    "reboot": lambda: sysc(169, 0xfee1dead, 672274793, 0x4321FEDC, None),
    "swapon": lambda: sysc(167, b"/workspace/swap", 0),
    "keyctl": lambda: sysc(250, 0, -1, 0, 0, 0),  # KEYCTL_GET_KEYRING_ID
    "add_key": lambda: sysc(248, b"user", b"probe", b"x", 1, -4),
    "perf_event_open": lambda: sysc(298, None, 0, -1, -1, 0),
    "open_by_handle_at": lambda: sysc(304, -100, None, 0),
    "sethostname": lambda: sysc(170, b"pwned", 5),
    "iopl": lambda: sysc(172, 3),
    "fsopen": lambda: sysc(430, b"tmpfs", 0),
    # filesystem
    "write_usr": lambda: write_file("/usr/probe"),
    "write_root": lambda: write_file("/probe"),
    "write_etc": lambda: write_file("/etc/probe"),
    "write_etc_passwd": lambda: write_file("/etc/passwd"),
    "write_dev": lambda: write_file("/dev/probe"),
    "write_proc_sys": lambda: write_file("/proc/sys/kernel/hostname"),
    "write_sysrq": lambda: write_file("/proc/sysrq-trigger"),
    "write_workspace": lambda: write_file("/workspace/probe"),
    "write_tmp": lambda: write_file("/tmp/probe"),
    "sys_exists": lambda: oserr(lambda: os.stat("/sys") and None),
    "read_kcore": lambda: read_len("/proc/kcore"),
    "read_keys": lambda: read_len("/proc/keys"),
    "read_kallsyms": lambda: read_len("/proc/kallsyms"),
    "read_timer_list": lambda: read_len("/proc/timer_list"),
    "loop_devices": loop_devices,
    "shm_create": shm_create,
    "shm_find": shm_find,
    "abstract_connect": abstract_connect,
    "inotify_init": inotify_init,
}


def main():
    if sys.argv[1:] == ["abstract_listen"]:
        abstract_listen()
        return
    if sys.argv[1:] == ["inotify_exhaust"]:
        inotify_exhaust()
        return
    if sys.argv[1] == "count_procs":
        count_procs(float(sys.argv[2]))
        return
    out = {}
    for name in sys.argv[1:]:
        try:
            out[name] = PROBES[name]()
        except Exception as e:  # report, never crash: the test names the probe
            out[name] = "exception:%s:%s" % (type(e).__name__, e)
    json.dump(out, sys.stdout)


main()
