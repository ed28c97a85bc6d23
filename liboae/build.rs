//! liboae.so's SONAME: `liboae.so.<major>`, so programs linked against it
//! load a compatible release, and `cargo xtask install-c` installs it as
//! `liboae.so.<version>` with the links the dynamic loader and the linker
//! look for.

fn main() {
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,-soname,liboae.so.{}",
        env!("CARGO_PKG_VERSION_MAJOR")
    );
}
