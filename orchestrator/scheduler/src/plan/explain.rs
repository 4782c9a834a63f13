//! Why a job waits: the capable nodes counted by what kept each from taking
//! it, and how that reads.

use super::{Availability, Plan, Planner, Unplaced, UnplacedJob};
use mcjs_spec::units::Usdc;
use std::collections::HashMap;
use std::fmt;

impl fmt::Display for Unplaced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(why) => write!(f, "invalid job: {why}"),
            Self::DuplicateJob => write!(f, "the job appears twice in the queue"),
            Self::EmptyFleet => write!(f, "the fleet has no nodes"),
            Self::NoCapableNode { missing } => write!(f, "no node has {missing}"),
            Self::NoSingleCapableNode => {
                write!(f, "no single node meets all hardware requirements together")
            }
            Self::NoneAvailable(a) => a.fmt(f),
        }
    }
}

impl fmt::Display for Availability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.capable;
        let nodes = if n == 1 { "node" } else { "nodes" };
        let all = |count: u32| count == n && n > 0;
        let retry = |f: &mut fmt::Formatter<'_>| match self.next_retry_unix {
            Some(t) => write!(f, " (first retry at unix {t})"),
            None => Ok(()),
        };
        if all(self.busy) {
            write!(f, "all {n} capable {nodes} are busy")
        } else if all(self.offline) {
            write!(f, "all {n} capable {nodes} are offline")
        } else if all(self.recently_failed) {
            write!(f, "all {n} capable {nodes} failed recently")?;
            retry(f)
        } else if all(self.too_expensive) {
            write!(
                f,
                "all {n} capable {nodes} cost more than {} USDC per gpu-hour",
                Usdc(self.max_per_gpu_hour)
            )?;
            match self.cheapest_per_gpu_hour {
                Some(c) => write!(f, " (cheapest free {} USDC)", Usdc(c)),
                None => Ok(()),
            }
        } else if all(self.held_for_scarcer_jobs) {
            write!(
                f,
                "all {n} capable {nodes} are held for jobs that only they can run"
            )
        } else {
            write!(f, "none of {n} capable {nodes} can take it now:")?;
            let parts = [
                (self.busy, "busy"),
                (self.offline, "offline"),
                (self.recently_failed, "failed recently"),
                (self.too_expensive, "too expensive"),
                (self.held_for_scarcer_jobs, "held for scarcer jobs"),
            ];
            let mut first = true;
            for (count, what) in parts.into_iter().filter(|(c, _)| *c > 0) {
                write!(f, "{} {count} {what}", if first { "" } else { "," })?;
                first = false;
            }
            if self.recently_failed > 0 {
                retry(f)?;
            }
            Ok(())
        }
    }
}

impl Planner<'_> {
    /// Counts a class whose every node meets the job's needs, from the class's counters.
    fn count_whole_class(
        &self,
        a: &mut Availability,
        c: u32,
        price: u64,
        free_prices: &mut [Option<Vec<u64>>],
    ) {
        let fleet = self.fleet;
        let entry = &fleet.classes[c as usize];
        let state = &self.classes[c as usize];
        let prices = free_prices[c as usize].get_or_insert_with(|| {
            let mut p: Vec<u64> = entry
                .available
                .iter()
                .map(|&slot| &fleet.nodes[slot as usize])
                .filter(|n| {
                    n.consecutive_failures == 0
                        || !self.config.backing_off(n, self.request.now_unix)
                })
                .map(|n| n.price_per_gpu_hour)
                .collect();
            p.sort_unstable();
            p
        });
        let affordable = prices.partition_point(|&p| p <= price) as u32;
        let affordable_taken = state.taken_prices.partition_point(|&p| p <= price) as u32;
        a.capable += entry.online + entry.offline;
        a.offline += entry.offline;
        a.busy += entry.busy + affordable_taken;
        a.recently_failed += state.backing_off;
        a.too_expensive += prices.len() as u32 - affordable;
        a.held_for_scarcer_jobs += affordable - affordable_taken;
        a.next_retry_unix = match (a.next_retry_unix, state.next_retry) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        if let Some(&cheapest) = prices.first() {
            a.cheapest_per_gpu_hour = Some(
                a.cheapest_per_gpu_hour
                    .map_or(cheapest, |c| c.min(cheapest)),
            );
        }
    }

    /// Counts, node by node, the nodes of a class whose bucket the job's need falls inside
    /// that meet it with their own values.
    fn count_fitting_nodes(&self, a: &mut Availability, s: usize, c: u32, price: u64) {
        let fleet = self.fleet;
        let entry = &fleet.classes[c as usize];
        let needs = &self.shapes[s].needs;
        let state = &self.classes[c as usize];
        let now = self.request.now_unix;
        for &slot in &entry.members {
            let node = &fleet.nodes[slot as usize];
            if !needs.admits(node) {
                continue;
            }
            a.capable += 1;
            match node.status {
                crate::types::NodeAvailability::Offline => a.offline += 1,
                crate::types::NodeAvailability::Busy => a.busy += 1,
                crate::types::NodeAvailability::Available => {}
            }
        }
        for (pos, &slot) in entry.available.iter().enumerate() {
            let node = &fleet.nodes[slot as usize];
            if !needs.admits(node) {
                continue;
            }
            if node.consecutive_failures > 0 && self.config.backing_off(node, now) {
                a.recently_failed += 1;
                let at = self.config.retry_at(node);
                a.next_retry_unix = a.next_retry_unix.min(at).or(a.next_retry_unix).or(at);
                continue;
            }
            let node_price = node.price_per_gpu_hour;
            a.cheapest_per_gpu_hour = Some(
                a.cheapest_per_gpu_hour
                    .map_or(node_price, |c| c.min(node_price)),
            );
            if node_price > price {
                a.too_expensive += 1;
            } else if state.taken.get(pos).copied().unwrap_or(false) {
                a.busy += 1;
            } else {
                a.held_for_scarcer_jobs += 1;
            }
        }
    }

    pub(super) fn explain(&mut self, plan: &mut Plan, waiting: &[(usize, usize)]) {
        let jobs = self.request.jobs;
        let fleet = self.fleet;
        if waiting.is_empty() {
            return;
        }
        // Prices of the nodes each class had free at the start, for counting "too expensive".
        let mut free_prices: Vec<Option<Vec<u64>>> = vec![None; self.classes.len()];
        for state in &mut self.classes {
            state.taken_prices.sort_unstable();
        }
        let mut by_shape: HashMap<usize, Unplaced> = HashMap::new();
        let mut by_price: HashMap<(usize, u64), Unplaced> = HashMap::new();
        for &(i, s) in waiting {
            let job = &jobs[i];
            let shape = &self.shapes[s];
            let no_capable_node = || {
                // Only requirements that no node meets even at the top of its buckets.
                let mask = fleet
                    .classes
                    .iter()
                    .filter(|c| !c.members.is_empty())
                    .fold(u16::MAX, |m, c| m & shape.needs.unmet_at_best(&c.profile));
                match shape.needs.requirement(mask) {
                    Some(missing) => Unplaced::NoCapableNode { missing },
                    None => Unplaced::NoSingleCapableNode,
                }
            };
            let reason = if fleet.is_empty() {
                Unplaced::EmptyFleet
            } else if shape.classes.is_empty() {
                by_shape.entry(s).or_insert_with(no_capable_node).clone()
            } else {
                let price = job.terms.max_price_per_gpu_hour;
                by_price
                    .entry((s, price))
                    .or_insert_with(|| {
                        let mut a = Availability {
                            max_per_gpu_hour: price,
                            ..Availability::default()
                        };
                        for &c in &shape.classes {
                            if shape.needs.unmet(&fleet.classes[c as usize].profile) == 0 {
                                self.count_whole_class(&mut a, c, price, &mut free_prices);
                            } else {
                                self.count_fitting_nodes(&mut a, s, c, price);
                            }
                        }
                        if a.capable == 0 {
                            // Only bucket-straddling classes, and none of their nodes fits.
                            return no_capable_node();
                        }
                        Unplaced::NoneAvailable(a)
                    })
                    .clone()
            };
            plan.unplaced.push(UnplacedJob {
                job: job.id,
                reason,
            });
        }
    }
}
