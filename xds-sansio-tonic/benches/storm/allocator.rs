//! A global allocator chosen by the environment. glibc's malloc, shared by the server and
//! tens of thousands of clients in one process, spends about half of a 50 000-client storm
//! searching its free lists, mostly for the clients' ~150 KB receive buffers (`benches/README.md`, run W13); in
//! a deployment the clients are other processes, so the bench can run on mimalloc to
//! measure the server without that.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

/// Serves each call from the allocator the environment names.
pub struct Chosen;

const UNREAD: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;
static CHOICE: AtomicU8 = AtomicU8::new(UNREAD);

/// The choice, read once. `getenv` does not allocate, so it can be asked from inside
/// the allocator before anything was allocated; threads racing to read it read the
/// same value.
fn choice() -> u8 {
    match CHOICE.load(Ordering::Relaxed) {
        UNREAD => {
            // SAFETY: a NUL-terminated name; nothing in this process calls `setenv`,
            // so the environment does not change under the read.
            let value = unsafe { libc::getenv(c"XDS_STORM_ALLOCATOR".as_ptr()) };
            let chosen = if !value.is_null()
                // SAFETY: getenv returns a NUL-terminated string or null.
                && unsafe { std::ffi::CStr::from_ptr(value) } == c"mimalloc"
            {
                MIMALLOC
            } else {
                SYSTEM
            };
            CHOICE.store(chosen, Ordering::Relaxed);
            chosen
        }
        chosen => chosen,
    }
}

/// The allocator's name, for the report; an unknown value of the variable is refused
/// here (the allocator itself must not panic).
pub fn name() -> &'static str {
    match std::env::var("XDS_STORM_ALLOCATOR").as_deref() {
        Err(_) | Ok("system") | Ok("mimalloc") => {}
        Ok(other) => panic!("XDS_STORM_ALLOCATOR: unknown allocator {other:?}"),
    }
    match choice() {
        MIMALLOC => "mimalloc",
        _ => "system (glibc)",
    }
}

// SAFETY: each call goes to one of two allocators, the same one for the process's
// whole life, which upholds `GlobalAlloc`'s contract.
unsafe impl GlobalAlloc for Chosen {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match choice() {
            MIMALLOC => unsafe { mimalloc::MiMalloc.alloc(layout) },
            _ => unsafe { System.alloc(layout) },
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match choice() {
            MIMALLOC => unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) },
            _ => unsafe { System.dealloc(ptr, layout) },
        }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match choice() {
            MIMALLOC => unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) },
            _ => unsafe { System.alloc_zeroed(layout) },
        }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match choice() {
            MIMALLOC => unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) },
            _ => unsafe { System.realloc(ptr, layout, new_size) },
        }
    }
}
