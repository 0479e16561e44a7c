use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

/// tcp configurations.
#[cfg_attr(docsrs, doc(cfg(madsim)))]
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq, Clone, Default)]
pub struct TcpConfig {
    /// qsim's patch: the bytes one direction of a connection carries before its writer waits
    /// (see `TcpWindow`); unset, a connection is unbounded, as published.
    #[serde(default)]
    pub window_bytes: Option<usize>,
}

#[allow(clippy::derived_hash_with_manual_eq)]
impl Hash for TcpConfig {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.window_bytes.hash(state);
    }
}
