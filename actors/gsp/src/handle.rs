//! The name of an RM object, a leaf every other part of the actor uses
//! (errors name objects by it).

use serde::{Deserialize, Serialize};
use std::fmt;

/// An RM object handle. `ObjectHandle::NONE` is the parent of a client.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectHandle(pub u32);

impl fmt::Debug for ObjectHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectHandle({:#010x})", self.0)
    }
}

impl ObjectHandle {
    pub const NONE: ObjectHandle = ObjectHandle(0);
}

impl fmt::Display for ObjectHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}
