//! (filled as the runtime's calls move here)
