//! libc's own functions, found past this executable's definitions (`dlsym(RTLD_NEXT)`), and
//! the few calls the cache makes on a file itself.

#![allow(unsafe_code)] // libc's symbols and system calls

macro_rules! real_fn {
    ($name:ident : fn($($arg:ty),*) -> $ret:ty) => {
        pub(crate) fn $name() -> unsafe extern "C" fn($($arg),*) -> $ret {
            static PTR: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
            let ptr = *PTR.get_or_init(|| {
                let name = std::ffi::CString::new(stringify!($name)).expect("a symbol name");
                // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT finds libc's definition.
                let ptr = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
                assert!(!ptr.is_null(), concat!("libc has no ", stringify!($name)));
                ptr as usize
            });
            // SAFETY: the symbol is libc's function of this signature (glibc's prototype).
            unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($arg),*) -> $ret>(ptr) }
        }
    };
}

pub(crate) mod sym {
    use libc::{c_char, c_int, c_uint, c_void, iovec, off_t, size_t, ssize_t};
    real_fn!(write: fn(c_int, *const c_void, size_t) -> ssize_t);
    real_fn!(pwrite: fn(c_int, *const c_void, size_t, off_t) -> ssize_t);
    real_fn!(pwrite64: fn(c_int, *const c_void, size_t, off_t) -> ssize_t);
    real_fn!(writev: fn(c_int, *const iovec, c_int) -> ssize_t);
    real_fn!(pwritev: fn(c_int, *const iovec, c_int, off_t) -> ssize_t);
    real_fn!(pwritev64: fn(c_int, *const iovec, c_int, off_t) -> ssize_t);
    real_fn!(pwritev2: fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t);
    real_fn!(pwritev64v2: fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t);
    real_fn!(fsync: fn(c_int) -> c_int);
    real_fn!(fdatasync: fn(c_int) -> c_int);
    real_fn!(ftruncate: fn(c_int, off_t) -> c_int);
    real_fn!(ftruncate64: fn(c_int, off_t) -> c_int);
    real_fn!(close: fn(c_int) -> c_int);
    real_fn!(dup2: fn(c_int, c_int) -> c_int);
    real_fn!(dup3: fn(c_int, c_int, c_int) -> c_int);
    real_fn!(unlink: fn(*const c_char) -> c_int);
    real_fn!(unlinkat: fn(c_int, *const c_char, c_int) -> c_int);
    real_fn!(rmdir: fn(*const c_char) -> c_int);
    real_fn!(rename: fn(*const c_char, *const c_char) -> c_int);
    real_fn!(renameat: fn(c_int, *const c_char, c_int, *const c_char) -> c_int);
    real_fn!(renameat2: fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int);
    real_fn!(copy_file_range: fn(c_int, *mut off_t, c_int, *mut off_t, size_t, c_uint) -> ssize_t);
    real_fn!(sendfile: fn(c_int, c_int, *mut off_t, size_t) -> ssize_t);
    real_fn!(sendfile64: fn(c_int, c_int, *mut off_t, size_t) -> ssize_t);
}

pub(super) fn fstat(fd: i32) -> Option<libc::stat> {
    // SAFETY: fstat writes one `stat` into memory we own.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut stat) == 0).then_some(stat)
    }
}

pub(super) fn fcntl_getfl(fd: i32) -> i32 {
    // SAFETY: F_GETFL takes no argument and reads the descriptor's flags.
    unsafe { libc::fcntl(fd, libc::F_GETFL) }.max(0)
}

pub(super) fn position(fd: i32) -> u64 {
    // SAFETY: lseek by 0 from the current position only reads it.
    unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) }.max(0) as u64
}

/// Up to `len` bytes of `fd`'s file at `at` (shorter at its end). A descriptor opened
/// write-only is read through a second one opened on the same file.
pub(super) fn read_at(fd: i32, at: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut bytes = vec![0; len];
    let read = |fd: i32, bytes: &mut [u8]| -> isize {
        // SAFETY: pread into a buffer of `bytes.len()` bytes we own.
        unsafe { libc::pread(fd, bytes.as_mut_ptr().cast(), bytes.len(), at as libc::off_t) }
    };
    let n = read(fd, &mut bytes);
    let n = if n >= 0 {
        n as usize
    } else {
        match std::fs::File::open(format!("/proc/self/fd/{fd}")) {
            Ok(file) => file.read_at(&mut bytes, at).unwrap_or(0),
            Err(_) => 0,
        }
    };
    bytes.truncate(n);
    bytes
}

pub(super) fn pwrite_all(fd: i32, bytes: &[u8], at: u64) -> std::io::Result<()> {
    let mut done = 0;
    while done < bytes.len() {
        // SAFETY: libc's pwrite over a buffer we own.
        let n = unsafe {
            sym::pwrite64()(fd, bytes[done..].as_ptr().cast(), bytes.len() - done, (at + done as u64) as libc::off_t)
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        done += n as usize;
    }
    Ok(())
}

pub(super) fn ftruncate(fd: i32, len: u64) -> std::io::Result<()> {
    // SAFETY: libc's ftruncate on a descriptor we own.
    match unsafe { sym::ftruncate64()(fd, len as libc::off_t) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}
