"""bench/outfile.py — the benchmark scripts' one way to write an output
file: whole or not at all (a temporary file in its folder, then a rename),
keeping the old file's mode; a path that is not a plain file (/dev/stdout,
a pipe) is written in place."""
import os
import tempfile


def out_path_error(path):
    """Why path cannot be written (replaced), or None. A path that is not
    a plain file (/dev/stdout, a pipe) is written in place: not checked
    (a full device shows only when written: write_whole raises OSError)."""
    if os.path.abspath(path).startswith(("/dev/", "/proc/")) or \
            (os.path.exists(path) and not os.path.isfile(path) and
             not os.path.isdir(path)):
        return None
    if os.path.isdir(path):
        return "is a directory"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"{folder} is not a directory"
    if not os.access(folder, os.W_OK):
        return f"{folder} is not writable"
    return None


def write_whole(path, text):
    """Writes text to path through a temporary file in its folder and a
    rename, so that a failure leaves the old file; a path that is not a
    plain file (/dev/stdout, a pipe) is written to in place."""
    if os.path.abspath(path).startswith(("/dev/", "/proc/")) or \
            (os.path.exists(path) and not os.path.isfile(path)):
        with open(path, "a") as f:
            f.write(text)
        return
    real = os.path.realpath(path)  # a link stays a link to the new file
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(real),
                               prefix="." + os.path.basename(real) + ".")
    try:
        with os.fdopen(fd, "w") as f:
            try:  # the old file's mode, else what open() would give
                mode = os.stat(real).st_mode & 0o777
            except OSError:
                mask = os.umask(0)
                os.umask(mask)
                mode = 0o666 & ~mask
            os.fchmod(f.fileno(), mode)
            f.write(text)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
