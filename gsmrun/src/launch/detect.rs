//! Which MPI is behind `mpirun` / `mpiexec`: Open MPI or MPICH's Hydra, read from the output of
//! `<launcher> --version`. Nothing else about the installation is checked here.

use super::{Flavour, LaunchError};
use std::process::{Command, Stdio};

/// The flavour named in a `--version` output, if it is one we know.
pub fn flavour_from_version(text: &str) -> Option<Flavour> {
    if text.contains("Open MPI") || text.contains("OpenRTE") {
        Some(Flavour::OpenMpi)
    } else if text.contains("HYDRA") || text.contains("Hydra") {
        Some(Flavour::Hydra)
    } else {
        None
    }
}

/// Run `program --version` and classify it.
pub fn detect(program: &str) -> Result<Flavour, LaunchError> {
    tracing::debug!(program, "asking the MPI launcher for its version");
    let out = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| LaunchError::from_spawn(program, source))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    flavour_from_version(&text).ok_or_else(|| LaunchError::UnknownFlavour {
        program: program.to_string(),
        first_line: text.lines().next().unwrap_or("").trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_both_flavours() {
        assert_eq!(
            flavour_from_version(
                "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/"
            ),
            Some(Flavour::OpenMpi)
        );
        assert_eq!(
            flavour_from_version("HYDRA build details:\n    Version:  4.0.2\n"),
            Some(Flavour::Hydra)
        );
        assert_eq!(flavour_from_version("Intel(R) MPI Library"), None);
    }
}
