//! Links the plugin with `-z nodelete`: Slurm `dlclose`s plugins, and a request thread that outlived its
//! deadline (or a Rust thread-local destructor) must never find its code unmapped.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
