//! What oaectl prints goes through here, so that two promises hold in one
//! place:
//!
//! - With `--json`, standard output carries the answer as JSON and nothing
//!   else: what is written for people (progress, tables) goes to standard
//!   error instead.
//! - A reader that stops early (`oaectl stats | head -1`) closes the pipe:
//!   the rest has nowhere to go, so oaectl ends quietly, as a Unix filter
//!   does, instead of panicking as `println!` does on a broken pipe. Any
//!   other write error is reported and ends oaectl with a failure.

use std::fmt::Arguments;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

static JSON: AtomicBool = AtomicBool::new(false);

/// From now on, text for people goes to standard error: standard output
/// is the JSON answer's alone.
pub fn json_mode() {
    JSON.store(true, Ordering::Relaxed);
}

/// Writes `text` (and a newline if asked) where text for people goes, and
/// flushes, so a reader following along sees each update as it is made.
pub fn write(text: Arguments<'_>, newline: bool) {
    if JSON.load(Ordering::Relaxed) {
        let mut err = std::io::stderr().lock();
        // Standard error gone: nothing is left to tell.
        let _ = err.write_fmt(text).and_then(|()| {
            if newline {
                err.write_all(b"\n")?;
            }
            err.flush()
        });
        return;
    }
    to_stdout(text, newline);
}

/// `value` as one JSON document on standard output.
pub fn json<T: Serialize>(value: &T) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    to_stdout(format_args!("{text}"), true);
    Ok(())
}

/// `value` as one line of JSON on standard output, for a stream of them.
pub fn json_line<T: Serialize>(value: &T) -> Result<(), String> {
    let text = serde_json::to_string(value).map_err(|e| e.to_string())?;
    to_stdout(format_args!("{text}"), true);
    Ok(())
}

fn to_stdout(text: Arguments<'_>, newline: bool) {
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

/// `println!` for people, that ends oaectl quietly when the reader has
/// gone.
macro_rules! outln {
    () => {
        $crate::out::write(format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*), true)
    };
}

/// `print!` for people, that ends oaectl quietly when the reader has gone.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*), false)
    };
}
