//! Where the workspace's built binaries are.
//!
//! An integration test executable lives in `<target>/<profile>/deps/`; Cargo puts the workspace's
//! binaries (`gsmrun`, `gsm-hello`, …) one level up, in `<target>/<profile>/`. Looking there works
//! with any `CARGO_TARGET_DIR` and with `cargo test --release`. This module does not build
//! anything: `cargo test -p gsm-tests` does not build other packages' binaries, so a missing one is
//! reported with the command that builds it.

use std::path::{Path, PathBuf};

/// The directory holding the binaries built in the same profile as the running test executable.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the running test knows its own executable");
    let deps = exe.parent().expect("a test executable sits in a directory");
    // `<target>/<profile>/deps/<test>-<hash>`; tolerate being run from `<profile>/` directly.
    if deps.file_name().is_some_and(|name| name == "deps") {
        deps.parent().expect("deps/ has a parent").to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

/// The path of the workspace binary `name`, built in the same profile as this test.
///
/// # Panics
/// If the binary has not been built, with a message saying how to build it.
pub fn bin(name: &str) -> PathBuf {
    let path = profile_dir().join(name);
    assert!(
        path.is_file(),
        "the binary `{name}` is missing at {}: build the workspace first with \
         `cargo build --release --workspace` (`make test` does this), using the same \
         CARGO_TARGET_DIR and profile as `cargo test`",
        path.display()
    );
    path
}

/// `gsmrun`, the launcher under test.
pub fn gsmrun() -> PathBuf {
    bin("gsmrun")
}

/// `gsm-hello`, the small MPI job the tests launch.
pub fn gsm_hello() -> PathBuf {
    bin("gsm-hello")
}

/// A script of the test bed, `tests/testbed/<name>` in the source tree.
///
/// # Panics
/// If the script is missing or not executable.
pub fn testbed_script(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testbed")
        .join(name);
    let executable = std::fs::metadata(&path)
        .map(|meta| std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0)
        .unwrap_or(false);
    assert!(
        executable,
        "test-bed script {} is missing or not executable",
        path.display()
    );
    path
}

/// The full path of `program`, looked up on `PATH` and then in `/usr/sbin` and `/sbin` (daemons
/// such as `slurmd` live there, and a test's `PATH` may lack them).
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).is_file().then(|| PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Whether `program` can be found (see [`which`]).
pub fn on_path(program: &str) -> bool {
    which(program).is_some()
}

/// A `PATH` on which `mpiexec` is MPICH's Hydra (`mpiexec.hydra`), as on a machine where MPICH is
/// the MPI, made in `dir`; Open MPI stays this machine's `mpirun`. Hydra starts its proxy from the
/// directory it was started from, so `hydra_pmi_proxy` is linked there too.
///
/// # Panics
/// If MPICH is not installed, saying that `make test` installs it.
pub fn hydra_path(dir: &Path) -> String {
    let hydra = which("mpiexec.hydra").expect(
        "MPICH's mpiexec.hydra is not installed; run `make test`, which installs it (package mpich)",
    );
    let hydra = std::fs::canonicalize(&hydra).expect("the path of mpiexec.hydra");
    let bin = dir.join("hydra-bin");
    std::fs::create_dir_all(&bin).unwrap_or_else(|e| panic!("mkdir {}: {e}", bin.display()));
    let proxy = hydra.with_file_name("hydra_pmi_proxy");
    for (link, target) in [("mpiexec", &hydra), ("hydra_pmi_proxy", &proxy)] {
        std::os::unix::fs::symlink(target, bin.join(link))
            .unwrap_or_else(|e| panic!("symlink {link} -> {}: {e}", target.display()));
    }
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}
