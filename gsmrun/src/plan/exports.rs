//! The user's `-x` items: read once from the raw arguments into [`Export`]s, which every later
//! step of the plan takes, and the ones passed on to the ranks. A check of `-x` values belongs in
//! [`parse`], the only place that sees them as the user wrote them.

use super::environment::Environment;
use crate::Error;
use crate::cli::Export;

/// Every `-x` of the command line, in order, refused (with the first bad one named) unless each
/// is `NAME` or `NAME=value` with a variable name.
pub(super) fn parse(raw: &[String]) -> Result<Vec<Export>, Error> {
    raw.iter()
        .map(|e| Export::parse(e).map_err(Error::Usage))
        .collect()
}

/// The `-x` variables passed on, with a warning in `warnings` for each that has no value.
///
/// `-x NAME` of a variable gsmrun's environment does not have is passed on as nothing, with
/// a word from gsmrun: Open MPI printed a warning of its own for it (about a variable
/// "requested to be forwarded but not found"), and MPICH and srun said nothing.
pub(super) fn passed(
    exports: &[Export],
    env: &Environment,
    warnings: &mut Vec<String>,
) -> Vec<Export> {
    exports
        .iter()
        .filter(|e| {
            // A value that is not UTF-8 is set all the same (the launcher passes it on).
            let unset = e.value.is_none() && env.var_os(&e.name).is_none();
            if unset {
                warnings.push(format!(
                    "gsmrun: warning: -x {0}: {0} is not set in gsmrun's environment, so the \
                     ranks do not get it (write -x {0}=VALUE to give it a value)",
                    e.name
                ));
            }
            !unset
        })
        .cloned()
        .collect()
}
