//! The fleet, grouped into hardware classes with an index of free nodes per class.
//!
//! Built once and updated per node change, so that planning for one arriving job touches only
//! the classes it can use instead of every node.

use crate::requirements::HardwareClass;
use crate::types::{FleetNode, NodeAvailability, NodeId};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum FleetError {
    #[error("node {0} appears twice: each node id must be unique")]
    DuplicateNode(u64),
    #[error("node {id} reports an impossible profile: {why}")]
    Implausible {
        id: u64,
        why: mcjs_spec::node_limits::NodeLimitError,
    },
    #[error("node {id} model {given:?} is not normalised: write {expected:?}")]
    ModelNotNormalised {
        id: u64,
        given: String,
        expected: String,
    },
    #[error("node {0} is not in the fleet")]
    UnknownNode(u64),
}

impl FleetError {
    /// The node the error is about.
    pub fn node(&self) -> NodeId {
        NodeId(match self {
            Self::DuplicateNode(id) | Self::UnknownNode(id) => *id,
            Self::Implausible { id, .. } | Self::ModelNotNormalised { id, .. } => *id,
        })
    }
}

#[derive(Clone, Debug)]
pub(crate) struct ClassEntry {
    pub profile: HardwareClass,
    /// The classes with the same discrete properties share a group.
    pub group: u32,
    /// Nodes of the class that are not offline: how common the hardware is.
    pub online: u32,
    pub busy: u32,
    pub offline: u32,
    /// Available nodes, best first: readiness descending, then price, then id.
    pub available: Vec<u32>,
    /// Available nodes with a failure history, whose back-off depends on the planning time.
    pub with_failures: Vec<u32>,
    /// Every node of the class, in no order: for jobs whose need falls inside a measured
    /// bucket, which are told about the nodes that fit one by one.
    pub members: Vec<u32>,
}

/// Nodes grouped by hardware class. Planning borrows it immutably.
#[derive(Clone, Debug, Default)]
pub struct FleetIndex {
    pub(crate) nodes: Vec<FleetNode>,
    pub(crate) node_class: Vec<u32>,
    /// Where each node sits in its class's `members`, so that moving it is O(1).
    member_pos: Vec<u32>,
    pub(crate) classes: Vec<ClassEntry>,
    slot_of: HashMap<NodeId, u32>,
    class_of: HashMap<HardwareClass, u32>,
    group_of: HashMap<HardwareClass, u32>,
}

fn order_key(n: &FleetNode) -> (Reverse<u8>, u64, NodeId) {
    (Reverse(n.readiness), n.price_per_gpu_hour, n.id)
}

/// Whether the index can hold a node: sizes within the shared bounds
/// (`mcjs_spec::node_limits`), at least one gpu, readiness a score, the model name normalised.
/// The one check behind [`FleetIndex::new`], [`FleetIndex::build`] and [`FleetIndex::upsert`];
/// callers that convert nodes from elsewhere use it to skip a node rather than a fleet.
pub fn validate_node(node: &FleetNode) -> Result<(), FleetError> {
    let sizes = mcjs_spec::node_limits::NodeSizes {
        gpu_count: node.gpu_count,
        vram_per_gpu_mib: node.vram_per_gpu_mib,
        compute_capability_sm: node.compute_capability,
        ram_mib: node.ram_mib,
        disk_gib: node.disk_free_gib,
        checkpoint_write_mibps: node.checkpoint_write_mibps,
        readiness: node.readiness,
    };
    sizes
        .check()
        .map_err(|why| FleetError::Implausible { id: node.id.0, why })?;
    if !mcjs_spec::gpu::is_normalized(&node.gpu_model) {
        return Err(FleetError::ModelNotNormalised {
            id: node.id.0,
            given: node.gpu_model.clone(),
            expected: mcjs_spec::gpu::normalize_model(&node.gpu_model),
        });
    }
    Ok(())
}

impl FleetIndex {
    /// The whole fleet, or the first node that cannot be indexed. For fleets that must be
    /// whole (the simulator, tests); the daemon uses [`FleetIndex::build`].
    pub fn new(nodes: impl IntoIterator<Item = FleetNode>) -> Result<Self, FleetError> {
        let (fleet, rejected) = Self::build(nodes);
        match rejected.into_iter().next() {
            None => Ok(fleet),
            Some(first) => Err(first),
        }
    }

    /// Indexes every valid node and returns the others with the reason, in input order: one
    /// malformed or duplicated node never keeps the rest of the fleet from being scheduled.
    /// Of two nodes with one id, the first is kept.
    pub fn build(nodes: impl IntoIterator<Item = FleetNode>) -> (Self, Vec<FleetError>) {
        let mut fleet = Self::default();
        let mut rejected = Vec::new();
        for node in nodes {
            if fleet.slot_of.contains_key(&node.id) {
                rejected.push(FleetError::DuplicateNode(node.id.0));
                continue;
            }
            if let Err(why) = validate_node(&node) {
                rejected.push(why);
                continue;
            }
            let slot = fleet.nodes.len() as u32;
            fleet.slot_of.insert(node.id, slot);
            fleet.nodes.push(node);
            fleet.node_class.push(0);
            fleet.member_pos.push(0);
            fleet.attach_unsorted(slot);
        }
        // One sort per class instead of a sorted insert per node.
        let nodes = &fleet.nodes;
        for class in &mut fleet.classes {
            class
                .available
                .sort_by_key(|&s| order_key(&nodes[s as usize]));
        }
        (fleet, rejected)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn class_count(&self) -> usize {
        self.classes.len()
    }

    /// How many distinct combinations of discrete properties (model, gpus, vram, compute
    /// capability, driver, cpu cores, stability) the fleet has.
    pub fn group_count(&self) -> usize {
        self.group_of.len()
    }

    pub fn node(&self, id: NodeId) -> Option<&FleetNode> {
        self.slot_of.get(&id).map(|&s| &self.nodes[s as usize])
    }

    pub fn nodes(&self) -> &[FleetNode] {
        &self.nodes
    }

    /// Adds a node or replaces its previous state (status, profile, price, failures).
    pub fn upsert(&mut self, node: FleetNode) -> Result<(), FleetError> {
        validate_node(&node)?;
        let slot = match self.slot_of.get(&node.id) {
            Some(&slot) => {
                self.detach(slot);
                self.nodes[slot as usize] = node;
                slot
            }
            None => {
                let slot = self.nodes.len() as u32;
                self.slot_of.insert(node.id, slot);
                self.nodes.push(node);
                self.node_class.push(0);
                self.member_pos.push(0);
                slot
            }
        };
        self.attach(slot);
        Ok(())
    }

    /// Changes only a node's status, the common update.
    pub fn set_status(&mut self, id: NodeId, status: NodeAvailability) -> Result<(), FleetError> {
        let mut node = self.node(id).ok_or(FleetError::UnknownNode(id.0))?.clone();
        node.status = status;
        self.upsert(node)
    }

    fn attach(&mut self, slot: u32) {
        self.attach_at(slot, true)
    }

    fn attach_unsorted(&mut self, slot: u32) {
        self.attach_at(slot, false)
    }

    fn attach_at(&mut self, slot: u32, keep_sorted: bool) {
        let node = &self.nodes[slot as usize];
        let profile = HardwareClass::of(node);
        let class = match self.class_of.get(&profile) {
            Some(&c) => c,
            None => {
                let c = self.classes.len() as u32;
                self.class_of.insert(profile.clone(), c);
                let groups = self.group_of.len() as u32;
                let group = *self.group_of.entry(profile.discrete()).or_insert(groups);
                self.classes.push(ClassEntry {
                    profile,
                    group,
                    online: 0,
                    busy: 0,
                    offline: 0,
                    available: Vec::new(),
                    with_failures: Vec::new(),
                    members: Vec::new(),
                });
                c
            }
        };
        self.node_class[slot as usize] = class;
        let key = order_key(node);
        let has_failures = node.consecutive_failures > 0;
        let status = node.status;
        let entry = &mut self.classes[class as usize];
        self.member_pos[slot as usize] = entry.members.len() as u32;
        entry.members.push(slot);
        match status {
            NodeAvailability::Offline => entry.offline += 1,
            NodeAvailability::Busy => {
                entry.online += 1;
                entry.busy += 1;
            }
            NodeAvailability::Available => {
                entry.online += 1;
                let nodes = &self.nodes;
                let pos = if keep_sorted {
                    entry
                        .available
                        .partition_point(|&s| order_key(&nodes[s as usize]) < key)
                } else {
                    entry.available.len()
                };
                entry.available.insert(pos, slot);
                if has_failures {
                    entry.with_failures.push(slot);
                }
            }
        }
    }

    fn detach(&mut self, slot: u32) {
        let node = &self.nodes[slot as usize];
        let class = self.node_class[slot as usize];
        let key = order_key(node);
        let entry = &mut self.classes[class as usize];
        let i = self.member_pos[slot as usize] as usize;
        debug_assert_eq!(entry.members.get(i), Some(&slot));
        entry.members.swap_remove(i);
        if let Some(&moved) = entry.members.get(i) {
            self.member_pos[moved as usize] = i as u32;
        }
        match node.status {
            NodeAvailability::Offline => entry.offline -= 1,
            NodeAvailability::Busy => {
                entry.online -= 1;
                entry.busy -= 1;
            }
            NodeAvailability::Available => {
                entry.online -= 1;
                let nodes = &self.nodes;
                let pos = entry
                    .available
                    .partition_point(|&s| order_key(&nodes[s as usize]) < key);
                debug_assert_eq!(entry.available.get(pos), Some(&slot));
                entry.available.remove(pos);
                entry.with_failures.retain(|&s| s != slot);
            }
        }
    }
}
