//! What a scheduler does about the lease, by what one read of it shows.

use mcjs::state::{Config, ConfigParams, SchedulerLease};
use mcjs_client::Pubkey;
use mcjs_client::rpc::LeaseView;
use mcjs_scheduler_daemon::lease::{LeaseRole, LeaseStep, lease_step};

fn key(n: u8) -> Pubkey {
    Pubkey::new_from_array([n; 32])
}

const SCHEDULER: u8 = 1;
const STANDBY: u8 = 2;
const STRANGER: u8 = 9;

/// The lease held by `holder` to slot 100 (20 slots a renewal), read at `slot`.
fn view(holder: u8, standbys: &[u8], slot: u64) -> LeaseView {
    let mut listed = [Pubkey::default(); mcjs::state::MAX_STANDBYS];
    for (i, s) in standbys.iter().enumerate() {
        listed[i] = key(*s);
    }
    LeaseView {
        lease: SchedulerLease {
            holder: key(holder),
            term: 7,
            expires_slot: 100,
            lease_slots: 20,
            standbys: listed,
            bump: 255,
        },
        config: Config {
            admin: key(0),
            scheduler: key(SCHEDULER),
            usdc_mint: key(0),
            usdc_decimals: 6,
            treasury: key(0),
            insurance_pool: key(0),
            params: ConfigParams {
                commission_bps: 0,
                slash_amount: 0,
                min_provider_stake: 0,
                liveness_factor: 3,
                withdrawal_cooldown_secs: 0,
                challenge_window_secs: 0,
                verification_fee_bps: 0,
                draw_secs: 0,
                require_proven_hardware: false,
            },
            paused: false,
            bump: 255,
            pool_bump: 255,
        },
        slot,
    }
}

#[test]
fn each_member_does_what_the_lease_it_reads_asks() {
    use LeaseStep::*;
    let table: &[(&str, LeaseView, u8, LeaseStep)] = &[
        (
            "holder, lease fresh",
            view(SCHEDULER, &[STANDBY], 85),
            SCHEDULER,
            Lead { term: 7 },
        ),
        (
            "holder, half left: renew",
            view(SCHEDULER, &[STANDBY], 90),
            SCHEDULER,
            Renew { term: 7 },
        ),
        (
            "holder, past expiry, not taken: renew",
            view(SCHEDULER, &[STANDBY], 130),
            SCHEDULER,
            Renew { term: 7 },
        ),
        (
            "lone holder, lease fresh",
            view(SCHEDULER, &[], 85),
            SCHEDULER,
            Lead { term: 7 },
        ),
        (
            "lone holder renews too: its live lease holds strangers' reports off",
            view(SCHEDULER, &[], 500),
            SCHEDULER,
            Renew { term: 7 },
        ),
        (
            "standby, lease running",
            view(SCHEDULER, &[STANDBY], 100),
            STANDBY,
            Follow {
                holder: key(SCHEDULER),
                term: 7,
            },
        ),
        (
            "standby, lease expired",
            view(SCHEDULER, &[STANDBY], 101),
            STANDBY,
            Take {
                from: key(SCHEDULER),
                term: 7,
            },
        ),
        (
            "scheduler, standby's lease running",
            view(STANDBY, &[STANDBY], 50),
            SCHEDULER,
            Follow {
                holder: key(STANDBY),
                term: 7,
            },
        ),
        (
            "holder removed from the members",
            view(STRANGER, &[STANDBY], 50),
            STANDBY,
            Take {
                from: key(STRANGER),
                term: 7,
            },
        ),
        (
            "stranger, expired lease",
            view(SCHEDULER, &[STANDBY], 500),
            STRANGER,
            Outsider,
        ),
        (
            "standby removed",
            view(SCHEDULER, &[], 500),
            STANDBY,
            Outsider,
        ),
    ];
    for (case, v, me, expected) in table {
        assert_eq!(lease_step(v, &key(*me)), *expected, "{case}");
    }
}

#[test]
fn a_takeover_leads_only_once_it_landed() {
    let take = LeaseStep::Take {
        from: key(SCHEDULER),
        term: 7,
    };
    assert_eq!(LeaseRole::after(take, true), LeaseRole::Leader { term: 8 });
    assert_eq!(
        LeaseRole::after(take, false),
        LeaseRole::Standby {
            holder: key(SCHEDULER),
            term: 7
        }
    );
    // A renewal that failed still leads: the chain names this holder
    // until another member's takeover lands.
    assert!(LeaseRole::after(LeaseStep::Renew { term: 7 }, false).leads());
    assert!(!LeaseRole::after(LeaseStep::Outsider, true).leads());
}
