//! GSP-RM's object tree: clients, and under each the objects a driver
//! allocates (devices, subdevices, VA spaces, memory, channel groups,
//! context shares, channels, engine objects, usermode, debugger), each
//! with its class and parent. An allocation is refused with RM's own
//! status for a bad client, a missing or wrong parent, a class the chip
//! does not have or a handle in use; a free takes the object and
//! everything under it.

use crate::chip::RmClasses;
use macuda_hw::rm::{class, status};
use std::collections::{BTreeMap, BTreeSet};

/// NV_ERR_INSERT_DUPLICATE_NAME: the handle is in use.
pub const DUPLICATE_NAME: u32 = 0x19;

/// What an object is, by the role its class plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Device,
    Subdevice,
    VaSpace,
    Memory,
    ChannelGroup,
    ContextShare,
    Channel,
    Engine,
    Usermode,
    Debugger,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object {
    pub class: u32,
    pub kind: Kind,
    pub parent: u32,
}

/// Every client and its objects.
#[derive(Default)]
pub struct Objects {
    clients: BTreeSet<u32>,
    objects: BTreeMap<(u32, u32), Object>,
}

impl Objects {
    pub fn get(&self, client: u32, handle: u32) -> Option<Object> {
        self.objects.get(&(client, handle)).copied()
    }

    pub fn has_client(&self, client: u32) -> bool {
        self.clients.contains(&client)
    }

    /// Objects of one client, for tests and reports.
    pub fn of_client(&self, client: u32) -> Vec<(u32, Object)> {
        self.objects
            .range((client, 0)..=(client, u32::MAX))
            .map(|(&(_, h), &o)| (h, o))
            .collect()
    }

    /// Allocate `handle` of `class` under `parent` for `client`; the
    /// status RM answers.
    pub fn alloc(
        &mut self,
        classes: &RmClasses,
        client: u32,
        parent: u32,
        handle: u32,
        class: u32,
    ) -> Result<(), u32> {
        if class == class::NV01_ROOT || class == class::NV01_ROOT_CLIENT {
            // GSP-RM's RPC names the new client in hClient.
            if !self.clients.insert(client) {
                return Err(DUPLICATE_NAME);
            }
            return Ok(());
        }
        if !self.clients.contains(&client) {
            return Err(status::INVALID_CLIENT);
        }
        let kind = classes.kind_of(class).ok_or(status::INVALID_CLASS)?;
        let parent_kind = if parent == client {
            None
        } else {
            Some(
                self.get(client, parent)
                    .ok_or(status::INVALID_OBJECT_PARENT)?
                    .kind,
            )
        };
        let allowed = match kind {
            Kind::Device => parent_kind.is_none(),
            Kind::Debugger => parent_kind.is_none() || parent_kind == Some(Kind::Device),
            Kind::Subdevice | Kind::VaSpace | Kind::Memory | Kind::ChannelGroup => {
                parent_kind == Some(Kind::Device)
            }
            Kind::ContextShare => parent_kind == Some(Kind::ChannelGroup),
            Kind::Channel => matches!(parent_kind, Some(Kind::Device | Kind::ChannelGroup)),
            Kind::Engine => parent_kind == Some(Kind::Channel),
            Kind::Usermode => parent_kind == Some(Kind::Subdevice),
        };
        if !allowed {
            return Err(status::INVALID_OBJECT_PARENT);
        }
        if handle == 0 || handle == client || self.objects.contains_key(&(client, handle)) {
            return Err(DUPLICATE_NAME);
        }
        self.objects.insert(
            (client, handle),
            Object {
                class,
                kind,
                parent,
            },
        );
        Ok(())
    }

    /// Free `handle` (a client, when it is the client's own handle) and
    /// everything under it.
    pub fn free(&mut self, client: u32, handle: u32) -> Result<Vec<(u32, Object)>, u32> {
        if !self.clients.contains(&client) {
            return Err(status::INVALID_CLIENT);
        }
        if handle == client {
            self.clients.remove(&client);
            let gone = self.of_client(client);
            self.objects.retain(|&(c, _), _| c != client);
            return Ok(gone);
        }
        if !self.objects.contains_key(&(client, handle)) {
            return Err(status::OBJECT_NOT_FOUND);
        }
        let mut doomed = vec![handle];
        let mut i = 0;
        while i < doomed.len() {
            let p = doomed[i];
            doomed.extend(
                self.of_client(client)
                    .into_iter()
                    .filter(|(_, o)| o.parent == p)
                    .map(|(h, _)| h),
            );
            i += 1;
        }
        Ok(doomed
            .into_iter()
            .filter_map(|h| self.objects.remove(&(client, h)).map(|o| (h, o)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chip::SimChip;

    #[test]
    fn parents_classes_and_handles_are_checked_as_rm_checks_them() {
        let classes = SimChip::gb202().classes;
        let mut o = Objects::default();
        let c = 0xC1E0_0004;
        assert_eq!(
            o.alloc(&classes, c, 0, 1, class::NV01_DEVICE_0),
            Err(status::INVALID_CLIENT)
        );
        o.alloc(&classes, c, 0, 0xCF00_0000, class::NV01_ROOT)
            .unwrap();
        assert_eq!(
            o.alloc(&classes, c, 0, 0, class::NV01_ROOT),
            Err(DUPLICATE_NAME)
        );
        o.alloc(&classes, c, c, 0x10, class::NV01_DEVICE_0).unwrap();
        assert_eq!(
            o.alloc(&classes, c, c, 0x11, class::NV20_SUBDEVICE_0),
            Err(status::INVALID_OBJECT_PARENT)
        );
        o.alloc(&classes, c, 0x10, 0x11, class::NV20_SUBDEVICE_0)
            .unwrap();
        assert_eq!(
            o.alloc(&classes, c, 0x10, 0x11, class::FERMI_VASPACE_A),
            Err(DUPLICATE_NAME)
        );
        assert_eq!(
            o.alloc(&classes, c, 0x99, 0x12, class::FERMI_VASPACE_A),
            Err(status::INVALID_OBJECT_PARENT)
        );
        // Hopper's compute class on a GB202.
        o.alloc(&classes, c, 0x10, 0x20, classes.gpfifo).unwrap();
        assert_eq!(
            o.alloc(&classes, c, 0x20, 0x21, 0xCBC0),
            Err(status::INVALID_CLASS)
        );
        o.alloc(&classes, c, 0x20, 0x21, classes.compute).unwrap();
        assert_eq!(
            o.free(c, 0x10).unwrap().len(),
            4,
            "the device and the three under it"
        );
        assert!(o.of_client(c).is_empty());
        assert_eq!(o.free(c, 0x10), Err(status::OBJECT_NOT_FOUND));
        assert_eq!(o.free(c, c).unwrap().len(), 0);
        assert!(!o.has_client(c));
    }
}
