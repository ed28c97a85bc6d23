//! What oaectl prints on standard output goes through here. A reader that
//! stops early (`oaectl stats | head -1`) closes the pipe: the rest has
//! nowhere to go, so oaectl ends quietly, as a Unix filter does, instead of
//! panicking as `println!` does on a broken pipe. Any other write error is
//! reported and ends oaectl with a failure.

use std::fmt::Arguments;
use std::io::{ErrorKind, Write};

/// Writes `text` (and a newline if asked) to standard output and flushes,
/// so a reader following along sees each update as it is made.
pub fn write(text: Arguments<'_>, newline: bool) {
    let mut out = std::io::stdout().lock();
    let result = out.write_fmt(text).and_then(|()| {
        if newline {
            out.write_all(b"\n")?;
        }
        out.flush()
    });
    match result {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("oaectl: writing to standard output: {e}");
            std::process::exit(1);
        }
    }
}

/// `println!` that ends oaectl quietly when the reader has gone.
macro_rules! outln {
    () => {
        $crate::out::write(format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*), true)
    };
}

/// `print!` that ends oaectl quietly when the reader has gone.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*), false)
    };
}
