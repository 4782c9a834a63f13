//! Compiles the GPU kernels' source as C for the host, so that the unit tests run the same
//! kernel text the node's NVRTC compiles, held to the Rust reference (`src/gpu/host.rs`).
//! Nothing outside the tests calls it.

fn main() {
    println!("cargo:rerun-if-changed=src/gpu/kernels.cu");
    cc::Build::new()
        .file("src/gpu/kernels.cu")
        .flag("-x")
        .flag("c")
        .flag("-std=c11")
        .define("MCJS_HOST", None)
        .opt_level(2)
        .warnings(true)
        .compile("mcjs_challenge_kernels_host");
}
