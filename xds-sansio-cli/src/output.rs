//! Printing that never panics: a closed stdout (`xds-sansio replay scenarios | head`) ends
//! the program quietly, as the reader wants no more; a closed stderr is ignored.

use std::fmt;
use std::io::{self, Write};

/// Writes one line to stdout (use [`say!`]). On a closed pipe the program exits with
/// status 0; on any other write error it says so on stderr and exits with status 2.
pub fn out_line(args: fmt::Arguments<'_>) {
    let mut stdout = io::stdout().lock();
    let written = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"));
    if let Err(e) = written {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        err_line(format_args!("cannot write to stdout: {e}"));
        std::process::exit(2);
    }
}

/// Writes one line to stderr (use [`complain!`]), ignoring failure: there is nowhere left
/// to report it.
pub fn err_line(args: fmt::Arguments<'_>) {
    let mut stderr = io::stderr().lock();
    let _ = stderr
        .write_fmt(args)
        .and_then(|()| stderr.write_all(b"\n"));
}

/// `println!` that ends quietly on a closed pipe.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::out_line(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics.
macro_rules! complain {
    ($($arg:tt)*) => {
        $crate::output::err_line(format_args!($($arg)*))
    };
}

pub(crate) use {complain, say};
