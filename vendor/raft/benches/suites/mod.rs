// Copyright 2019 TiKV Project Authors. Licensed under Apache-2.0.

mod raft;
pub use self::raft::*;
mod raw_node;
pub use self::raw_node::*;
mod progress;
pub use self::progress::*;
