//! Binds the system's DPDK: flags and libraries from `pkg-config libdpdk`,
//! the C shim compiled with them (they carry `-include rte_config.h` and the
//! `-march` DPDK was built for, which its inline functions need), and
//! bindgen over the EAL, ethdev and mempool API the driver calls.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const SETUP_HINT: &str = "install DPDK 22.11's development files (`cargo xtask setup` does: \
                          apt-get install dpdk dpdk-dev libdpdk-dev)";

fn pkg_config(arg: &str) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args([arg, "libdpdk"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run pkg-config ({e}); {SETUP_HINT}"));
    if !out.status.success() {
        panic!(
            "pkg-config does not know libdpdk ({}); {SETUP_HINT}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn main() {
    println!("cargo:rerun-if-changed=shim");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let version = pkg_config("--modversion");
    if !version.first().is_some_and(|v| v.starts_with("22.11")) {
        println!(
            "cargo:warning=DPDK {} found; these bindings are written for 22.11",
            version.join(" ")
        );
    }
    // `-include rte_config.h` is two words: keep them together.
    let mut cflags = Vec::new();
    let mut words = pkg_config("--cflags").into_iter();
    while let Some(w) = words.next() {
        if w == "-include" {
            let file = words.next().expect("-include names a file");
            cflags.push(format!("-include{file}"));
        } else {
            cflags.push(w);
        }
    }

    let mut shim = cc::Build::new();
    shim.file("shim/shim.c").include("shim").warnings(true);
    for flag in &cflags {
        shim.flag(flag);
    }
    shim.compile("oae_dpdk_shim");

    for word in pkg_config("--libs") {
        if let Some(lib) = word.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        } else if let Some(dir) = word.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        }
    }

    let bindings = bindgen::Builder::default()
        .header("shim/wrapper.h")
        .clang_args(&cflags)
        .clang_arg("-Ishim")
        .allowlist_function(
            "rte_eal_init|rte_eal_cleanup|rte_eal_get_runtime_dir|rte_strerror|rte_socket_id|\
             rte_eth_dev_count_avail|rte_eth_dev_get_port_by_name|rte_eth_dev_info_get|\
             rte_eth_dev_configure|rte_eth_rx_queue_setup|rte_eth_tx_queue_setup|\
             rte_eth_dev_start|rte_eth_dev_stop|rte_eth_dev_close|rte_eth_macaddr_get|\
             rte_eth_stats_get|rte_eth_promiscuous_enable|rte_eth_dev_socket_id|\
             rte_pktmbuf_pool_create|rte_mempool_free|oae_.*",
        )
        .allowlist_type("rte_eth_conf|rte_eth_dev_info|rte_ether_addr|rte_eth_stats")
        .allowlist_var("RTE_PKTMBUF_HEADROOM|RTE_ETH_NAME_MAX_LEN|RTE_MBUF_DEFAULT_DATAROOM")
        .derive_default(true)
        .layout_tests(false)
        // DPDK's header comments are its own documentation; copied here,
        // their indented passages would read as Rust examples to rustdoc.
        .generate_comments(false)
        .generate()
        .unwrap_or_else(|e| panic!("bindgen over DPDK's headers failed: {e}; {SETUP_HINT}"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("writing the bindings");
}
