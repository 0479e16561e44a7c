//! The hooks: libc's symbols as this executable defines them. Each asks the cache (the parent
//! module), then calls libc's own (or, under a directory whose power is out, reports success
//! and does nothing).

#![allow(unsafe_code)] // libc's symbols, defined here and forwarded to libc

use libc::{c_char, c_int, c_uint, c_void, iovec, off_t, size_t, ssize_t};

use super::real::sym;
use super::{
    Removal, Verdict, after_synced_write, before_removal, before_truncate, before_write, forget_fd, on_dir_sync,
    on_sync, resolve,
};

fn iov_len(iov: *const iovec, count: c_int) -> usize {
    if iov.is_null() || count <= 0 {
        return 0;
    }
    // SAFETY: the caller passes `count` iovecs, as writev requires.
    let iov = unsafe { std::slice::from_raw_parts(iov, count as usize) };
    iov.iter().map(|v| v.iov_len).sum()
}

/// The bytes of `iov`, copied (only for synced writes on watched files).
fn iov_bytes(iov: *const iovec, count: c_int, written: usize) -> Vec<u8> {
    // SAFETY: as in `iov_len`; each iovec points at `iov_len` readable bytes.
    let iov = unsafe { std::slice::from_raw_parts(iov, count.max(0) as usize) };
    let mut bytes = Vec::with_capacity(written);
    for v in iov {
        let take = v.iov_len.min(written - bytes.len());
        bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, take) });
    }
    bytes
}

/// After libc's write returned `ret`: a synced write's bytes are the file's synced ones.
fn after(
    verdict: &Verdict,
    fd: c_int,
    offset: Option<off_t>,
    ret: ssize_t,
    bytes: impl FnOnce(usize) -> Vec<u8>,
) -> ssize_t {
    if ret > 0 && matches!(verdict, Verdict::Synced) {
        after_synced_write(fd, offset, &bytes(ret as usize));
    }
    ret
}

fn buf_bytes(buf: *const c_void, n: usize) -> Vec<u8> {
    // SAFETY: the write just read `n` bytes from `buf`.
    unsafe { std::slice::from_raw_parts(buf as *const u8, n) }.to_vec()
}

/// A write dropped while the power is out: it "wrote" everything, and moves the position
/// as a write would.
fn dropped(fd: c_int, advance: Option<usize>, len: usize) -> ssize_t {
    if let Some(len) = advance {
        // SAFETY: lseek on the caller's descriptor.
        unsafe { libc::lseek(fd, len as off_t, libc::SEEK_CUR) };
    }
    len as ssize_t
}

#[unsafe(no_mangle)]
unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    match before_write(fd, None, count) {
        Verdict::Drop => dropped(fd, Some(count), count),
        verdict => after(&verdict, fd, None, unsafe { sym::write()(fd, buf, count) }, |n| buf_bytes(buf, n)),
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, count: size_t, offset: off_t) -> ssize_t {
    match before_write(fd, Some(offset), count) {
        Verdict::Drop => dropped(fd, None, count),
        verdict => {
            after(&verdict, fd, Some(offset), unsafe { sym::pwrite()(fd, buf, count, offset) }, |n| buf_bytes(buf, n))
        }
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, count: size_t, offset: off_t) -> ssize_t {
    match before_write(fd, Some(offset), count) {
        Verdict::Drop => dropped(fd, None, count),
        verdict => {
            after(&verdict, fd, Some(offset), unsafe { sym::pwrite64()(fd, buf, count, offset) }, |n| buf_bytes(buf, n))
        }
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
    let len = iov_len(iov, count);
    match before_write(fd, None, len) {
        Verdict::Drop => dropped(fd, Some(len), len),
        verdict => after(&verdict, fd, None, unsafe { sym::writev()(fd, iov, count) }, |n| iov_bytes(iov, count, n)),
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pwritev(fd: c_int, iov: *const iovec, count: c_int, offset: off_t) -> ssize_t {
    let len = iov_len(iov, count);
    match before_write(fd, Some(offset), len) {
        Verdict::Drop => dropped(fd, None, len),
        verdict => after(&verdict, fd, Some(offset), unsafe { sym::pwritev()(fd, iov, count, offset) }, |n| {
            iov_bytes(iov, count, n)
        }),
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pwritev64(fd: c_int, iov: *const iovec, count: c_int, offset: off_t) -> ssize_t {
    let len = iov_len(iov, count);
    match before_write(fd, Some(offset), len) {
        Verdict::Drop => dropped(fd, None, len),
        verdict => after(&verdict, fd, Some(offset), unsafe { sym::pwritev64()(fd, iov, count, offset) }, |n| {
            iov_bytes(iov, count, n)
        }),
    }
}

/// `offset` -1 writes at (and moves) the position, as `writev` does.
#[unsafe(no_mangle)]
unsafe extern "C" fn pwritev2(fd: c_int, iov: *const iovec, count: c_int, offset: off_t, flags: c_int) -> ssize_t {
    let len = iov_len(iov, count);
    let at = (offset >= 0).then_some(offset);
    match before_write(fd, at, len) {
        Verdict::Drop => dropped(fd, at.is_none().then_some(len), len),
        verdict => after(&verdict, fd, at, unsafe { sym::pwritev2()(fd, iov, count, offset, flags) }, |n| {
            iov_bytes(iov, count, n)
        }),
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pwritev64v2(fd: c_int, iov: *const iovec, count: c_int, offset: off_t, flags: c_int) -> ssize_t {
    let len = iov_len(iov, count);
    let at = (offset >= 0).then_some(offset);
    match before_write(fd, at, len) {
        Verdict::Drop => dropped(fd, at.is_none().then_some(len), len),
        verdict => after(&verdict, fd, at, unsafe { sym::pwritev64v2()(fd, iov, count, offset, flags) }, |n| {
            iov_bytes(iov, count, n)
        }),
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    let ret = unsafe { sym::fsync()(fd) };
    synced(fd, ret)
}

#[unsafe(no_mangle)]
unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    let ret = unsafe { sym::fdatasync()(fd) };
    synced(fd, ret)
}

/// After a sync of `fd` returned `ret`: a successful one makes its file durable.
fn synced(fd: c_int, ret: c_int) -> c_int {
    if ret == 0 {
        // Dropped while the power is out: the sync "succeeded" and made nothing durable.
        let _ = on_sync(fd);
        on_dir_sync(fd);
    }
    ret
}

#[unsafe(no_mangle)]
unsafe extern "C" fn ftruncate(fd: c_int, len: off_t) -> c_int {
    match before_truncate(fd, len) {
        Verdict::Drop => 0,
        Verdict::Pass | Verdict::Synced => unsafe { sym::ftruncate()(fd, len) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn ftruncate64(fd: c_int, len: off_t) -> c_int {
    match before_truncate(fd, len) {
        Verdict::Drop => 0,
        Verdict::Pass | Verdict::Synced => unsafe { sym::ftruncate64()(fd, len) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn close(fd: c_int) -> c_int {
    forget_fd(fd);
    unsafe { sym::close()(fd) }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    forget_fd(new);
    unsafe { sym::dup2()(old, new) }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    forget_fd(new);
    unsafe { sym::dup3()(old, new, flags) }
}

fn path_of(dirfd: c_int, path: *const c_char) -> Option<std::path::PathBuf> {
    // SAFETY: the caller passes a NUL-terminated path, as unlink and rename require.
    (!path.is_null()).then(|| resolve(dirfd, unsafe { std::ffi::CStr::from_ptr(path) }))
}

fn removing(dirfd: c_int, path: *const c_char, removal: Removal) -> Verdict {
    path_of(dirfd, path).map_or(Verdict::Pass, |path| before_removal(&path, removal))
}

#[unsafe(no_mangle)]
unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    match removing(libc::AT_FDCWD, path, Removal::Unlink) {
        Verdict::Drop => 0,
        Verdict::Pass | Verdict::Synced => unsafe { sym::unlink()(path) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    match removing(libc::AT_FDCWD, path, Removal::Rmdir) {
        Verdict::Drop => 0,
        Verdict::Pass | Verdict::Synced => unsafe { sym::rmdir()(path) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let removal = if flags & libc::AT_REMOVEDIR != 0 { Removal::Rmdir } else { Removal::Unlink };
    match removing(dirfd, path, removal) {
        Verdict::Drop => 0,
        Verdict::Pass | Verdict::Synced => unsafe { sym::unlinkat()(dirfd, path, flags) },
    }
}

/// A rename replaces the target's entry; dropped when either side's power is out.
fn renaming(olddirfd: c_int, old: *const c_char, newdirfd: c_int, new: *const c_char) -> Verdict {
    let from = path_of(olddirfd, old).map_or(Verdict::Pass, |p| super::dead_verdict(&p));
    match (from, removing(newdirfd, new, Removal::Replaced)) {
        (Verdict::Pass, Verdict::Pass) => Verdict::Pass,
        _ => Verdict::Drop,
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn rename(old: *const c_char, new: *const c_char) -> c_int {
    match renaming(libc::AT_FDCWD, old, libc::AT_FDCWD, new) {
        Verdict::Drop => 0,
        Verdict::Pass | Verdict::Synced => unsafe { sym::rename()(old, new) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn renameat(olddirfd: c_int, old: *const c_char, newdirfd: c_int, new: *const c_char) -> c_int {
    match renaming(olddirfd, old, newdirfd, new) {
        Verdict::Drop => 0,
        Verdict::Pass | Verdict::Synced => unsafe { sym::renameat()(olddirfd, old, newdirfd, new) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn renameat2(
    olddirfd: c_int,
    old: *const c_char,
    newdirfd: c_int,
    new: *const c_char,
    flags: c_uint,
) -> c_int {
    match renaming(olddirfd, old, newdirfd, new) {
        Verdict::Drop => 0,
        Verdict::Pass | Verdict::Synced => unsafe { sym::renameat2()(olddirfd, old, newdirfd, new, flags) },
    }
}

/// Copies into a watched file are refused (`EXDEV`): callers (the standard library's
/// `fs::copy`, RocksDB's `CopyFile`) then copy with `read` and `write`, which are seen.
#[unsafe(no_mangle)]
unsafe extern "C" fn copy_file_range(
    fd_in: c_int,
    off_in: *mut off_t,
    fd_out: c_int,
    off_out: *mut off_t,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    if super::is_watched_fd(fd_out) {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = libc::EXDEV };
        return -1;
    }
    unsafe { sym::copy_file_range()(fd_in, off_in, fd_out, off_out, len, flags) }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn sendfile(out_fd: c_int, in_fd: c_int, offset: *mut off_t, count: size_t) -> ssize_t {
    if super::is_watched_fd(out_fd) {
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return -1;
    }
    unsafe { sym::sendfile()(out_fd, in_fd, offset, count) }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn sendfile64(out_fd: c_int, in_fd: c_int, offset: *mut off_t, count: size_t) -> ssize_t {
    if super::is_watched_fd(out_fd) {
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return -1;
    }
    unsafe { sym::sendfile64()(out_fd, in_fd, offset, count) }
}
