//! Plans, the reasons a job waits, and the placement policies.

mod explain;
pub mod reliability;

use crate::fleet::FleetIndex;
use crate::plan::reliability::{FailurePrior, ServiceRecord, survival_probability};
use crate::requirements::{InvalidJob, Needs, Requirement};
use crate::types::{ExpectedDemand, JobId, NodeId, PlacementConfig, QueuedJob};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// What to plan: the queue, the time, the demand expected soon, and what reliability-aware
/// placement reads: each node's record and each job's expected duration.
#[derive(Clone, Copy, Debug)]
pub struct PlanRequest<'a> {
    pub jobs: &'a [QueuedJob],
    pub now_unix: i64,
    pub expected: &'a [ExpectedDemand],
    /// What the chain records of the nodes; a node not listed has no history.
    pub history: &'a [ServiceRecord],
    /// Each job's expected remaining run time in seconds, in the order of `jobs`; empty (or of
    /// another length) when unknown, and then no job weighs reliability.
    pub expected_secs: &'a [i64],
}

impl<'a> PlanRequest<'a> {
    pub fn new(jobs: &'a [QueuedJob], now_unix: i64) -> Self {
        Self {
            jobs,
            now_unix,
            expected: &[],
            history: &[],
            expected_secs: &[],
        }
    }

    pub fn with_history(mut self, history: &'a [ServiceRecord]) -> Self {
        self.history = history;
        self
    }

    pub fn with_expected_secs(mut self, expected_secs: &'a [i64]) -> Self {
        self.expected_secs = expected_secs;
        self
    }

    pub fn with_expected(mut self, expected: &'a [ExpectedDemand]) -> Self {
        self.expected = expected;
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub job: JobId,
    pub node: NodeId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnplacedJob {
    pub job: JobId,
    pub reason: Unplaced,
}

/// Why capable nodes exist but none could take the job now. Every capable node is counted
/// once, in the first matching bucket: offline, busy (including just assigned in this plan),
/// recently failed, too expensive, held for jobs that only it can run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Availability {
    pub capable: u32,
    pub offline: u32,
    pub busy: u32,
    pub recently_failed: u32,
    pub too_expensive: u32,
    pub held_for_scarcer_jobs: u32,
    pub next_retry_unix: Option<i64>,
    pub cheapest_per_gpu_hour: Option<u64>,
    pub max_per_gpu_hour: u64,
}

/// Why a job was not placed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Unplaced {
    Invalid(InvalidJob),
    DuplicateJob,
    EmptyFleet,
    /// No node in the fleet meets this requirement, whatever else it offers.
    NoCapableNode {
        missing: Requirement,
    },
    /// Each requirement is met somewhere, but never all on one node.
    NoSingleCapableNode,
    NoneAvailable(Availability),
}

/// The placements for one planning round and an explanation for every job left waiting.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub placements: Vec<Placement>,
    pub unplaced: Vec<UnplacedJob>,
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for p in &self.placements {
            writeln!(f, "{} -> {}", p.job, p.node)?;
        }
        for u in &self.unplaced {
            writeln!(f, "{} waits: {}", u.job, u.reason)?;
        }
        Ok(())
    }
}

/// A placement policy: a pure function of the fleet and the request.
pub trait PlacementPolicy {
    fn name(&self) -> &'static str;
    fn plan(&self, fleet: &FleetIndex, request: &PlanRequest<'_>) -> Plan;
}

/// Keeps scarce hardware for the jobs that only it can run; urgent deadlines first, then age;
/// best readiness among equal nodes. See docs/scheduler.md.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScarcityAware {
    pub config: PlacementConfig,
}

/// Baseline: each job takes the lowest-numbered node that fits.
#[derive(Clone, Copy, Debug, Default)]
pub struct FirstFit {
    pub config: PlacementConfig,
}

/// Baseline: each job takes a node of the smallest hardware class that fits.
#[derive(Clone, Copy, Debug, Default)]
pub struct BestFit {
    pub config: PlacementConfig,
}

impl PlacementPolicy for ScarcityAware {
    fn name(&self) -> &'static str {
        "scarcity-aware"
    }
    fn plan(&self, fleet: &FleetIndex, request: &PlanRequest<'_>) -> Plan {
        Planner::new(Strategy::ScarcityAware, self.config, fleet, request).run()
    }
}

impl PlacementPolicy for FirstFit {
    fn name(&self) -> &'static str {
        "first-fit"
    }
    fn plan(&self, fleet: &FleetIndex, request: &PlanRequest<'_>) -> Plan {
        Planner::new(Strategy::FirstFit, self.config, fleet, request).run()
    }
}

impl PlacementPolicy for BestFit {
    fn name(&self) -> &'static str {
        "best-fit"
    }
    fn plan(&self, fleet: &FleetIndex, request: &PlanRequest<'_>) -> Plan {
        Planner::new(Strategy::BestFit, self.config, fleet, request).run()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strategy {
    ScarcityAware,
    FirstFit,
    BestFit,
}

/// A failure that later jobs of the same shape can reuse: nothing was placed since, so a job
/// offering no more money finds nothing either.
#[derive(Clone, Copy)]
struct FailureMemo {
    epoch: u64,
    max_price: u64,
}

struct Shape {
    needs: Needs,
    classes: Vec<u32>,
    /// Online nodes able to run the shape: small means the job depends on rare hardware.
    breadth: u64,
    tier: u32,
    queued: f64,
    expected: f64,
    preference: Vec<u32>,
    /// Index 0 honours holds, index 1 ignores them.
    memo: [Option<FailureMemo>; 2],
}

#[derive(Default)]
struct ClassState {
    free: u32,
    cursor: usize,
    taken: Vec<bool>,
    taken_prices: Vec<u64>,
    backing_off: u32,
    next_retry: Option<i64>,
    load: f64,
    /// The narrowest breadth (nodes it can use) of any shape with demand, queued or
    /// expected, that can use this class: low on hardware a narrow shape depends on.
    narrowest: u64,
    /// Expected arrivals that only narrower hardware sets serve: (tier, jobs).
    holds: Vec<(u32, f64)>,
}

struct Planner<'a> {
    strategy: Strategy,
    config: PlacementConfig,
    fleet: &'a FleetIndex,
    request: &'a PlanRequest<'a>,
    shapes: Vec<Shape>,
    classes: Vec<ClassState>,
    epoch: u64,
    /// Present when this plan weighs reliability.
    records: Option<Records>,
}

/// Each node's record by fleet slot, and the fleet prior for nodes without one.
struct Records {
    prior: FailurePrior,
    by_slot: Vec<(u32, f64)>,
}

impl Records {
    fn new(fleet: &FleetIndex, history: &[ServiceRecord], weight_hours: f64) -> Self {
        let by_node: HashMap<_, _> = history.iter().map(|r| (r.node, r)).collect();
        // Only the records of nodes in the fleet make the prior, each once.
        let by_slot = fleet
            .nodes
            .iter()
            .map(|n| {
                by_node
                    .get(&n.id)
                    .map_or((0, 0.0), |r| (r.failures, r.hours_in_service))
            })
            .collect::<Vec<_>>();
        let known: Vec<ServiceRecord> = fleet
            .nodes
            .iter()
            .filter_map(|n| by_node.get(&n.id).map(|r| **r))
            .collect();
        Self {
            prior: FailurePrior::from_fleet(&known, weight_hours),
            by_slot,
        }
    }

    fn survival(&self, slot: u32, hours: f64) -> f64 {
        let (failures, in_service) = self.by_slot[slot as usize];
        survival_probability(failures, in_service, self.prior, hours)
    }
}

fn tier_of(breadth: u64) -> u32 {
    // Shapes within a factor of two of each other compete as equals, so deadline and age
    // still order most of the queue; only markedly rarer hardware gets precedence.
    if breadth == 0 { 0 } else { breadth.ilog2() }
}

impl<'a> Planner<'a> {
    fn new(
        strategy: Strategy,
        config: PlacementConfig,
        fleet: &'a FleetIndex,
        request: &'a PlanRequest<'a>,
    ) -> Self {
        let now = request.now_unix;
        let classes = fleet
            .classes
            .iter()
            .map(|entry| {
                let mut state = ClassState {
                    free: entry.available.len() as u32,
                    ..ClassState::default()
                };
                for &slot in &entry.with_failures {
                    let node = &fleet.nodes[slot as usize];
                    if config.backing_off(node, now) {
                        state.backing_off += 1;
                        state.free -= 1;
                        let at = config.retry_at(node);
                        state.next_retry = state.next_retry.min(at).or(state.next_retry).or(at);
                    }
                }
                state
            })
            .collect();
        let weighs_reliability = strategy == Strategy::ScarcityAware
            && config.reliability.enabled
            && !request.jobs.is_empty()
            && request.expected_secs.len() == request.jobs.len();
        let records = weighs_reliability.then(|| {
            Records::new(
                fleet,
                request.history,
                config.reliability.prior_weight_hours as f64,
            )
        });
        Self {
            strategy,
            config,
            fleet,
            request,
            shapes: Vec::new(),
            classes,
            epoch: 0,
            records,
        }
    }

    fn shape_for(&mut self, index: &mut HashMap<Needs, usize>, needs: Needs) -> usize {
        if let Some(&s) = index.get(&needs) {
            return s;
        }
        let fleet = self.fleet;
        // Every class that may hold a fitting node: on a measured value the need can fall
        // inside a class's bucket, and then its nodes are checked one by one when chosen.
        // The exact properties are checked once per discrete group, the measured ones (a few
        // integer comparisons) per class.
        let mut discrete: Vec<Option<bool>> = vec![None; fleet.group_count()];
        let classes: Vec<u32> = (0..fleet.classes.len() as u32)
            .filter(|&c| {
                let entry = &fleet.classes[c as usize];
                // A class every node has left (after updates) offers nothing.
                !entry.members.is_empty()
                    && *discrete[entry.group as usize]
                        .get_or_insert_with(|| needs.unmet_discrete(&entry.profile) == 0)
                    && needs.unmet_measured_at_best(&entry.profile) == 0
            })
            .collect();
        let breadth = classes
            .iter()
            .map(|&c| fleet.classes[c as usize].online as u64)
            .sum();
        let s = self.shapes.len();
        index.insert(needs.clone(), s);
        self.shapes.push(Shape {
            needs,
            classes,
            breadth,
            tier: tier_of(breadth),
            queued: 0.0,
            expected: 0.0,
            preference: Vec::new(),
            memo: [None, None],
        });
        s
    }

    fn run(mut self) -> Plan {
        let jobs = self.request.jobs;
        let now = self.request.now_unix;
        let mut index = HashMap::new();
        let mut seen = HashSet::with_capacity(jobs.len());
        let job_shape: Vec<Result<usize, Unplaced>> = jobs
            .iter()
            .map(|job| {
                if !seen.insert(job.id) {
                    return Err(Unplaced::DuplicateJob);
                }
                let needs = Needs::of(&job.hardware, &job.checkpoint).map_err(Unplaced::Invalid)?;
                let s = self.shape_for(&mut index, needs);
                self.shapes[s].queued += 1.0;
                Ok(s)
            })
            .collect();
        for demand in self.request.expected {
            if let Ok(needs) = Needs::of(&demand.hardware, &demand.checkpoint) {
                let s = self.shape_for(&mut index, needs);
                self.shapes[s].expected += demand.jobs.max(0.0);
            }
        }
        self.prepare_preferences();

        let mut order: Vec<usize> = (0..jobs.len()).collect();
        let key = |i: &usize| {
            let job = &jobs[*i];
            let tier = match (&job_shape[*i], self.strategy) {
                (Ok(s), Strategy::ScarcityAware) => self.shapes[*s].tier,
                _ => 0,
            };
            let urgent_deadline = job
                .terms
                .deadline_unix
                .filter(|d| d.saturating_sub(now) <= self.config.urgent_within_secs);
            (
                tier,
                urgent_deadline.is_none(),
                urgent_deadline.unwrap_or(0),
                job.terms.submitted_unix,
                job.id,
            )
        };
        order.sort_by_cached_key(key);

        let mut plan = Plan::default();
        let mut waiting = Vec::new();
        for i in order {
            let job = &jobs[i];
            match &job_shape[i] {
                Err(reason) => plan.unplaced.push(UnplacedJob {
                    job: job.id,
                    reason: reason.clone(),
                }),
                Ok(s) => match self.place(i, *s) {
                    Some(node) => plan.placements.push(Placement { job: job.id, node }),
                    None => waiting.push((i, *s)),
                },
            }
        }
        self.explain(&mut plan, &waiting);
        plan
    }

    fn prepare_preferences(&mut self) {
        let fleet = self.fleet;
        for shape in &self.shapes {
            let demand = shape.queued + shape.expected;
            if demand == 0.0 || shape.breadth == 0 {
                continue;
            }
            for &c in &shape.classes {
                let online = fleet.classes[c as usize].online as f64;
                let state = &mut self.classes[c as usize];
                // Demand spread over the shape's hardware in proportion to supply: load per
                // node is high on classes that narrow shapes depend on.
                state.load += demand / shape.breadth as f64;
                state.narrowest = match state.narrowest {
                    0 => shape.breadth,
                    n => n.min(shape.breadth),
                };
                if shape.expected > 0.0 {
                    let share = shape.expected * online / shape.breadth as f64;
                    state.holds.push((shape.tier, share));
                }
            }
        }
        for s in 0..self.shapes.len() {
            // Shapes of expected demand only weigh on loads and holds; nothing is placed
            // with them, so they need no class order.
            if self.shapes[s].queued == 0.0 {
                continue;
            }
            let mut preference = self.shapes[s].classes.clone();
            let profile = |c: u32| &fleet.classes[c as usize].profile;
            match self.strategy {
                Strategy::ScarcityAware => preference.sort_by(|&a, &b| {
                    let (sa, sb) = (&self.classes[a as usize], &self.classes[b as usize]);
                    sa.load
                        .total_cmp(&sb.load)
                        .then_with(|| {
                            let online = |c: u32| Reverse(fleet.classes[c as usize].online);
                            online(a).cmp(&online(b))
                        })
                        .then_with(|| profile(a).cmp(profile(b)))
                }),
                // Classes order by gpu count, vram, compute capability, then the rest: the
                // smallest hardware that fits comes first.
                Strategy::BestFit => preference.sort_by(|&a, &b| profile(a).cmp(profile(b))),
                Strategy::FirstFit => {}
            }
            self.shapes[s].preference = preference;
        }
    }

    fn held(&self, class: u32, tier: u32) -> u32 {
        let held: f64 = self.classes[class as usize]
            .holds
            .iter()
            .filter(|(t, _)| *t < tier)
            .map(|(_, jobs)| jobs)
            .sum();
        held.ceil() as u32
    }

    fn ignores_holds(&self, job: &QueuedJob) -> bool {
        self.strategy != Strategy::ScarcityAware
            || self
                .request
                .now_unix
                .saturating_sub(job.terms.submitted_unix)
                >= self.config.max_hold_secs
    }

    fn place(&mut self, i: usize, s: usize) -> Option<NodeId> {
        let job = &self.request.jobs[i];
        let ignore_holds = self.ignores_holds(job);
        let price = job.terms.max_price_per_gpu_hour;
        let memo_slot = ignore_holds as usize;
        if let Some(m) = self.shapes[s].memo[memo_slot]
            && m.epoch == self.epoch
            && price <= m.max_price
        {
            return None;
        }
        let avoid = job.terms.recovering_from;
        let tier = self.shapes[s].tier;
        let mut fallback: Option<(u32, usize)> = None;
        let mut chosen: Option<(u32, usize)> = None;
        let preference = std::mem::take(&mut self.shapes[s].preference);
        if self.strategy == Strategy::FirstFit {
            let mut best: Option<(NodeId, u32, usize)> = None;
            for &c in &preference {
                if self.classes[c as usize].free == 0 {
                    continue;
                }
                if let Some((pos, is_fallback)) = self.lowest_id_node(s, c, price, avoid) {
                    let id = self.node_at(c, pos).id;
                    if is_fallback {
                        fallback = fallback.or(Some((c, pos)));
                    } else if best.is_none_or(|(b, _, _)| id < b) {
                        best = Some((id, c, pos));
                    }
                }
            }
            chosen = best.map(|(_, c, pos)| (c, pos));
        } else if self.records.is_some() {
            // Reliability within scarcity: only classes about as lightly loaded as the first
            // one that can take the job are searched, and among their nodes the job takes the
            // one most likely to survive its expected duration.
            let hours = self.request.expected_secs[i].max(0) as f64 / 3600.0;
            let slack = 1.0 + self.config.reliability.load_slack_percent as f64 / 100.0;
            let mut band: Option<(f64, u64)> = None;
            let mut best: Option<(f64, u32, usize)> = None;
            for &c in &preference {
                let free = self.classes[c as usize].free;
                if free == 0 || (!ignore_holds && free <= self.held(c, tier)) {
                    continue;
                }
                let (load, narrowest) = {
                    let state = &self.classes[c as usize];
                    (state.load, state.narrowest)
                };
                if band.is_some_and(|(first, _)| load > first * slack) {
                    break;
                }
                // Never onto hardware that a narrower shape than the first class's depends on.
                if band.is_some_and(|(_, first)| narrowest < first) {
                    continue;
                }
                match self.most_reliable_node(s, c, price, avoid, hours) {
                    Some((pos, false, survival)) => {
                        band.get_or_insert((load, narrowest));
                        if best.is_none_or(|(b, _, _)| self.prefers(survival, b)) {
                            best = Some((survival, c, pos));
                        }
                    }
                    Some((pos, true, _)) => fallback = fallback.or(Some((c, pos))),
                    None => {}
                }
            }
            chosen = best.map(|(_, c, pos)| (c, pos));
        } else {
            for &c in &preference {
                let free = self.classes[c as usize].free;
                if free == 0 || (!ignore_holds && free <= self.held(c, tier)) {
                    continue;
                }
                match self.best_node(s, c, price, avoid) {
                    Some((pos, false)) => {
                        chosen = Some((c, pos));
                        break;
                    }
                    Some((pos, true)) => fallback = fallback.or(Some((c, pos))),
                    None => {}
                }
            }
        }
        self.shapes[s].preference = preference;
        match chosen.or(fallback) {
            Some((c, pos)) => {
                let node = self.node_at(c, pos);
                // The class matched on bucket floors, which every node of it reaches; the
                // node's own values are checked once more so that no placement rests on the
                // index alone.
                let admitted = self.shapes[s].needs.admits(node);
                debug_assert!(
                    admitted,
                    "{} does not meet the needs its class meets",
                    node.id
                );
                if !admitted {
                    return None;
                }
                let (id, node_price) = (node.id, node.price_per_gpu_hour);
                let state = &mut self.classes[c as usize];
                if state.taken.is_empty() {
                    state.taken = vec![false; self.fleet.classes[c as usize].available.len()];
                }
                state.taken[pos] = true;
                state.taken_prices.push(node_price);
                state.free -= 1;
                self.epoch += 1;
                Some(id)
            }
            None => {
                let memo = &mut self.shapes[s].memo[memo_slot];
                let max_price = match memo {
                    Some(m) if m.epoch == self.epoch => m.max_price.max(price),
                    _ => price,
                };
                *memo = Some(FailureMemo {
                    epoch: self.epoch,
                    max_price,
                });
                None
            }
        }
    }

    /// Whether the shape's need falls inside one of the class's measured buckets, so that only
    /// some of its nodes fit and each must be checked; otherwise every node fits.
    fn straddles(&self, s: usize, class: u32) -> bool {
        self.shapes[s]
            .needs
            .unmet(&self.fleet.classes[class as usize].profile)
            != 0
    }

    fn node_at(&self, class: u32, pos: usize) -> &'a crate::types::FleetNode {
        let slot = self.fleet.classes[class as usize].available[pos];
        &self.fleet.nodes[slot as usize]
    }

    fn usable(&self, class: u32, pos: usize) -> bool {
        let state = &self.classes[class as usize];
        if state.taken.get(pos).copied().unwrap_or(false) {
            return false;
        }
        let node = self.node_at(class, pos);
        node.consecutive_failures == 0 || !self.config.backing_off(node, self.request.now_unix)
    }

    /// The best free node of a class the job can afford: readiness order, skipping the node
    /// that just failed the job unless it is the only one (returned with `true`).
    fn best_node(
        &mut self,
        s: usize,
        class: u32,
        price: u64,
        avoid: Option<NodeId>,
    ) -> Option<(usize, bool)> {
        let len = self.fleet.classes[class as usize].available.len();
        let check_each = self.straddles(s, class);
        let mut cursor = self.classes[class as usize].cursor;
        while cursor < len && !self.usable(class, cursor) {
            cursor += 1;
        }
        self.classes[class as usize].cursor = cursor;
        let mut fallback = None;
        for pos in cursor..len {
            if !self.usable(class, pos) {
                continue;
            }
            let node = self.node_at(class, pos);
            if node.price_per_gpu_hour > price || (check_each && !self.shapes[s].needs.admits(node))
            {
                continue;
            }
            if Some(node.id) == avoid {
                fallback = Some((pos, true));
                continue;
            }
            return Some((pos, false));
        }
        fallback
    }

    /// The free node of a class the job can afford that is most likely to run `hours` without
    /// failing (or that best fits the survival target, [`Self::prefers`]), with its survival
    /// probability; among equals the first in readiness order. The node that just failed the
    /// job only when it is the only one (returned with `true`).
    fn most_reliable_node(
        &mut self,
        s: usize,
        class: u32,
        price: u64,
        avoid: Option<NodeId>,
        hours: f64,
    ) -> Option<(usize, bool, f64)> {
        let len = self.fleet.classes[class as usize].available.len();
        let check_each = self.straddles(s, class);
        let mut cursor = self.classes[class as usize].cursor;
        while cursor < len && !self.usable(class, cursor) {
            cursor += 1;
        }
        self.classes[class as usize].cursor = cursor;
        let records = self.records.as_ref()?;
        let mut best: Option<(usize, f64)> = None;
        let mut fallback = None;
        for pos in cursor..len {
            if !self.usable(class, pos) {
                continue;
            }
            let node = self.node_at(class, pos);
            if node.price_per_gpu_hour > price || (check_each && !self.shapes[s].needs.admits(node))
            {
                continue;
            }
            let slot = self.fleet.classes[class as usize].available[pos];
            let survival = records.survival(slot, hours);
            if Some(node.id) == avoid {
                fallback = Some((pos, true, survival));
            } else if best.is_none_or(|(_, b)| self.prefers(survival, b)) {
                best = Some((pos, survival));
            }
        }
        best.map(|(pos, p)| (pos, false, p)).or(fallback)
    }

    /// Whether a node that survives the job with probability `a` is strictly better than one
    /// with `b`: more likely to survive, or, with a survival target, meeting it by less.
    fn prefers(&self, a: f64, b: f64) -> bool {
        let target = self.config.reliability.survival_target_percent as f64 / 100.0;
        if target <= 0.0 {
            return a > b;
        }
        match (a >= target, b >= target) {
            (true, true) => a < b,
            (true, false) => true,
            (false, true) => false,
            (false, false) => a > b,
        }
    }

    fn lowest_id_node(
        &self,
        s: usize,
        class: u32,
        price: u64,
        avoid: Option<NodeId>,
    ) -> Option<(usize, bool)> {
        let len = self.fleet.classes[class as usize].available.len();
        let check_each = self.straddles(s, class);
        let mut best: Option<(NodeId, usize)> = None;
        let mut fallback = None;
        for pos in 0..len {
            if !self.usable(class, pos) {
                continue;
            }
            let node = self.node_at(class, pos);
            if node.price_per_gpu_hour > price || (check_each && !self.shapes[s].needs.admits(node))
            {
                continue;
            }
            if Some(node.id) == avoid {
                fallback = Some((pos, true));
            } else if best.is_none_or(|(id, _)| node.id < id) {
                best = Some((node.id, pos));
            }
        }
        best.map(|(_, pos)| (pos, false)).or(fallback)
    }
}
