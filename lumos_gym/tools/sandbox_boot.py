"""The child side of the sandbox: the boot program that every sandboxed process runs first.

:data:`_BOOT` is Python source passed on the child's command line (``sys.executable -s -P -c
_BOOT ...``, see ``_command`` in :mod:`lumos_gym.tools.sandbox`), never a module or file path,
so it imports nothing from lumos_gym: it finishes the box (the filesystem view, the tmpfs's
limits, ``pid_max``, the capabilities), sets the rlimits and runs the program as ``__main__``.
"""

# Runs in the child as `python -s -P -c _BOOT STATUS_FD PARENT PID_MAX FS NAME:SOFT:HARD...`.
# As the first process (pid 1) of a fresh PID namespace it finishes the box when FS is a JSON
# spec: with "read_only" (the unshare path) it builds the whole view of the filesystem, with a
# tmpfs as the working directory; without (bwrap built the view) it sets the limits of the
# tmpfs bwrap mounted as the working directory. It then lowers pid_max, drops its capabilities,
# forks the program and reports the program's wait status on STATUS_FD, since pid 1 cannot
# die of its own signal. It also ends the namespace when the caller dies: the caller holds the
# only read end of STATUS_FD, so a POLLERR there means it is gone. Outside a PID namespace (FS
# is then "-") the program itself asks for SIGKILL on the death of its parent, PARENT.
# The program process closes STATUS_FD, sets the rlimits and runs main.py as __main__.
_BOOT = """\
import os, sys

def _supervise(child, status_fd):
    status = 0
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == child:
            break
    try:
        os.write(status_fd, str(status).encode())
    except OSError:
        pass
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if code >= 0 else 128 - code)

def _lifeline(status_fd):
    import select, threading
    def watch():
        poll = select.poll()
        poll.register(status_fd, 0)
        while not poll.poll():
            pass
        os._exit(137)
    threading.Thread(target=watch, daemon=True).start()

def _die_with_parent(parent):
    import ctypes, signal
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(137)

def _libc():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    def call(name, *args):
        if getattr(libc, name)(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, name + ": " + os.strerror(err))
    return ctypes, libc, call

def _mount(src, dst, fstype, flags, data=None):
    ctypes, libc, call = _libc()
    enc = [None if s is None else s.encode() for s in (src, dst, fstype, data)]
    call("mount", enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3])

def _close_fs(spec):
    import json
    spec = json.loads(spec)
    if "read_only" not in spec:
        _mount(None, spec["workdir"], None, 32 | 2 | 4, spec["tmpfs"])
        return
    ctypes, libc, call = _libc()
    root, kept_flags = spec["workdir"], 2 | 4 | 8 | 1024 | 2048
    def bind(src, dst, read_only):
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            open(dst, "a").close()
        _mount(src, dst, None, 4096 | (16384 if read_only else 0))
        if read_only:
            found = os.statvfs(src).f_flag
            extra = (found & kept_flags) | (2097152 if found & 4096 else 0)
            _mount(None, dst, None, 4096 | 32 | 1 | 2 | extra)
    with open("main.py", "rb") as f:
        program = f.read()
    _mount(None, "/", None, 16384 | 262144)
    _mount("tmpfs", root, "tmpfs", 2 | 4, "mode=0755")
    for path in spec["read_only"]:
        if os.path.islink(path):
            os.makedirs(os.path.dirname(root + path), exist_ok=True)
            os.symlink(os.readlink(path), root + path)
        elif os.path.exists(path):
            bind(path, root + path, True)
    for name in ("null", "zero", "full", "random", "urandom"):
        bind("/dev/" + name, root + "/dev/" + name, False)
    os.symlink(root, root + "/dev/shm")
    os.makedirs(root + root, exist_ok=True)
    _mount("tmpfs", root + root, "tmpfs", 2 | 4, spec["tmpfs"] + ",mode=0700")
    with open(root + root + "/main.py", "wb") as f:
        f.write(program)
    os.makedirs(root + "/proc")
    _mount("proc", root + "/proc", "proc", 2 | 4 | 8)
    for name in ("keys", "key-users"):
        if os.path.exists(root + "/proc/" + name):
            _mount("/dev/null", root + "/proc/" + name, None, 4096)
    os.chdir(root)
    call("syscall", spec["pivot_root"], b".", b".")
    call("umount2", b".", 2)
    _mount(None, "/", None, 4096 | 32 | 1 | 2 | 4)
    os.chdir(root)

def _drop_capabilities():
    ctypes, libc, call = _libc()
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)
    call("capset", (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)())
    call("prctl", 38, 1, 0, 0, 0)

def _limit(spec):
    import resource
    name, soft, hard = spec.split(":")
    which = getattr(resource, "RLIMIT_" + name)
    soft, hard = int(soft), int(hard)
    current = resource.getrlimit(which)[1]
    if current != resource.RLIM_INFINITY:
        hard = min(hard, current)
        soft = min(soft, hard)
    resource.setrlimit(which, (soft, hard))

def _main():
    status_fd, parent, pid_max = (int(arg) for arg in sys.argv[1:4])
    fs = sys.argv[4]
    if os.getpid() == 1:
        if fs != "-":
            _close_fs(fs)
        if pid_max:
            try:
                with open("/proc/sys/kernel/pid_max", "w") as f:
                    f.write(str(pid_max))
            except OSError:
                pass
        if fs != "-":
            _drop_capabilities()
        child = os.fork()
        if child:
            _lifeline(status_fd)
            _supervise(child, status_fd)
    else:
        _die_with_parent(parent)
    if status_fd >= 0:
        os.close(status_fd)
    for spec in sys.argv[5:]:
        _limit(spec)
    sys.argv = ["main.py"]
    with open("main.py", "rb") as f:
        source = f.read()
    scope = {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__}
    try:
        exec(compile(source, "main.py", "exec"), scope)
    except SystemExit:
        raise
    except BaseException as e:
        import traceback
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        sys.exit(1)

_main()
"""
