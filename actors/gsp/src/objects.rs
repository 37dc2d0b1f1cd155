//! The RM object tree as the null RM keeps it: every object has a parent
//! (except clients), freeing an object frees its subtree, and only the
//! parent/child class pairs RM accepts are allowed.

use crate::error::GspError;
use crate::handle::ObjectHandle;

use macuda_hw::class;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RmObject {
    pub handle: ObjectHandle,
    pub parent: ObjectHandle,
    pub class: u32,
}

/// The classes each class the null RM supports may sit under; an empty
/// list means it has no parent (a client).
fn parents_of(child: u32) -> Option<&'static [u32]> {
    const DEVICE: &[u32] = &[class::NV01_DEVICE_0];
    match child {
        class::NV01_ROOT_CLIENT => Some(&[]),
        class::NV01_DEVICE_0 => Some(&[class::NV01_ROOT_CLIENT]),
        class::NV20_SUBDEVICE_0
        | class::FERMI_VASPACE_A
        | class::NV01_MEMORY_LOCAL_USER
        | class::KEPLER_CHANNEL_GROUP_A
        | class::GT200_DEBUGGER => Some(DEVICE),
        c if GPFIFO_CLASSES.contains(&c) => Some(&[class::KEPLER_CHANNEL_GROUP_A]),
        c if ENGINE_CLASSES.contains(&c) => Some(GPFIFO_CLASSES),
        _ => None,
    }
}

/// Channel classes the null RM keeps under a channel group.
const GPFIFO_CLASSES: &[u32] = &[
    macuda_hw::methods::host::HOPPER_CHANNEL_GPFIFO_A,
    macuda_hw::methods::host::BLACKWELL_CHANNEL_GPFIFO_A,
];

/// Engine classes the null RM binds on a channel (any channel class).
const ENGINE_CLASSES: &[u32] = &[
    macuda_hw::methods::compute::HOPPER_COMPUTE_A,
    macuda_hw::methods::compute::BLACKWELL_COMPUTE_A,
    macuda_hw::methods::compute::BLACKWELL_COMPUTE_B,
    macuda_hw::methods::copy::HOPPER_DMA_COPY_A,
    macuda_hw::methods::copy::BLACKWELL_DMA_COPY_A,
    macuda_hw::methods::copy::BLACKWELL_DMA_COPY_B,
];

/// Handles are made unique by a running counter above this base, so a
/// stale handle from an earlier object is never reused.
const HANDLE_BASE: u32 = 0xCAF0_0000;

#[derive(Debug, Default)]
pub struct ObjectTree {
    objects: BTreeMap<ObjectHandle, RmObject>,
    next: u32,
}

impl ObjectTree {
    /// # Errors
    /// Unknown parent, a class the null RM lacks, or a wrong parent class.
    pub fn alloc(&mut self, parent: ObjectHandle, class: u32) -> Result<ObjectHandle, GspError> {
        let wanted = parents_of(class).ok_or(GspError::UnsupportedClass {
            backend: "null",
            class,
        })?;
        let parent_class = if parent == ObjectHandle::NONE {
            None
        } else {
            Some(
                self.objects
                    .get(&parent)
                    .ok_or(GspError::NoSuchObject(parent))?
                    .class,
            )
        };
        let fits = match parent_class {
            None => wanted.is_empty(),
            Some(p) => wanted.contains(&p),
        };
        if !fits {
            return Err(GspError::BadParent {
                class,
                parent,
                parent_class: parent_class.unwrap_or(0),
            });
        }
        self.next += 1;
        let handle = ObjectHandle(HANDLE_BASE + self.next);
        self.objects.insert(
            handle,
            RmObject {
                handle,
                parent,
                class,
            },
        );
        Ok(handle)
    }

    /// Free an object and everything under it; returns how many went.
    ///
    /// # Errors
    /// Unknown handle.
    pub fn free(&mut self, handle: ObjectHandle) -> Result<u32, GspError> {
        if !self.objects.contains_key(&handle) {
            return Err(GspError::NoSuchObject(handle));
        }
        let mut doomed = vec![handle];
        let mut i = 0;
        while i < doomed.len() {
            let h = doomed[i];
            doomed.extend(
                self.objects
                    .values()
                    .filter(|o| o.parent == h)
                    .map(|o| o.handle),
            );
            i += 1;
        }
        for h in &doomed {
            self.objects.remove(h);
        }
        Ok(u32::try_from(doomed.len()).unwrap_or(u32::MAX))
    }

    pub fn get(&self, handle: ObjectHandle) -> Option<&RmObject> {
        self.objects.get(&handle)
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    pub fn all(&self) -> Vec<RmObject> {
        self.objects.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_and_frees_a_tree() {
        let mut t = ObjectTree::default();
        let client = t
            .alloc(ObjectHandle::NONE, class::NV01_ROOT_CLIENT)
            .unwrap();
        let device = t.alloc(client, class::NV01_DEVICE_0).unwrap();
        let sub = t.alloc(device, class::NV20_SUBDEVICE_0).unwrap();
        let va = t.alloc(device, class::FERMI_VASPACE_A).unwrap();
        assert_eq!(t.len(), 4);
        assert_ne!(sub, va);
        assert_eq!(t.free(device).unwrap(), 3);
        assert_eq!(t.len(), 1);
        assert!(matches!(t.free(sub), Err(GspError::NoSuchObject(_))));
    }

    #[test]
    fn enforces_parent_classes() {
        let mut t = ObjectTree::default();
        let client = t
            .alloc(ObjectHandle::NONE, class::NV01_ROOT_CLIENT)
            .unwrap();
        assert!(matches!(
            t.alloc(client, class::NV20_SUBDEVICE_0),
            Err(GspError::BadParent { .. })
        ));
        assert!(matches!(
            t.alloc(ObjectHandle::NONE, class::NV01_DEVICE_0),
            Err(GspError::BadParent { .. })
        ));
        assert!(matches!(
            t.alloc(client, 0xC86F),
            Err(GspError::BadParent { class: 0xC86F, .. })
        ));
        assert!(matches!(
            t.alloc(client, 0xB2CC),
            Err(GspError::UnsupportedClass { class: 0xB2CC, .. })
        ));
        // A channel under a group, an engine under the channel; an engine
        // straight under the group is refused.
        let device = t.alloc(client, class::NV01_DEVICE_0).unwrap();
        let group = t.alloc(device, class::KEPLER_CHANNEL_GROUP_A).unwrap();
        let channel = t.alloc(group, 0xC86F).unwrap();
        t.alloc(channel, 0xCBC0).unwrap();
        assert!(matches!(
            t.alloc(group, 0xCBC0),
            Err(GspError::BadParent { .. })
        ));
        assert!(matches!(
            t.alloc(ObjectHandle(0x1234), class::NV01_DEVICE_0),
            Err(GspError::NoSuchObject(_))
        ));
    }
}
