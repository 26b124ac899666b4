//! SIGPIPE blocked in the control plane's own threads.
//!
//! hyper writes with `writev`, which (unlike `send` with `MSG_NOSIGNAL`) raises SIGPIPE when
//! the peer has closed the connection. A Rust program ignores SIGPIPE from its start; the
//! hosts of this library do not all: Go crashes on a SIGPIPE that arrives on a thread it did
//! not start ("signal: broken pipe", seen once in eight runs of the Go tests with the test
//! control plane's refusals). A write raises SIGPIPE in the thread that wrote, so blocking it
//! in the runtime's threads makes that write fail with `EPIPE` instead, and the host's own
//! disposition of the signal is left as it was.

/// Blocks SIGPIPE in the calling thread (a tokio runtime's `on_thread_start`).
#[cfg(unix)]
pub(crate) fn block_in_this_thread() {
    // SAFETY: `set` is initialised by `sigemptyset` before use; `pthread_sigmask` only
    // changes the calling thread's mask and accepts a null old-set pointer.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Nothing to block where there is no SIGPIPE.
#[cfg(not(unix))]
pub(crate) fn block_in_this_thread() {}
