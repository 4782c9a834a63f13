//! What a warm standby may read of a job's store.

use super::*;

/// A warm standby reads what restoring the job's latest attested
/// checkpoint takes (the spec, the listing, the descriptors, that
/// checkpoint's files) and nothing else: no older or newer checkpoint's
/// bytes, no input, no output, no write, no copy; a node named for another
/// job, or for none, reads nothing of this one.
#[test]
fn a_warm_standby_reads_only_the_latest_attested_checkpoint_and_writes_nothing() {
    let w = world(JobState::Running { since: 0 });
    let j = w.job;
    let standing = [(j, w.jobs[0].1.clone())];
    let standby = Caller::Node {
        node: Pubkey::new_unique(),
        jobs: &[],
        checking: &[],
        standby: &standing,
        inputs: &w.inputs,
    };
    // The job's account attests step 40 of generation 1.
    let latest = format!("jobs/{j}/checkpoints/{}/files/a", key(40, 1));
    let spec = format!("specs/{}.json", hex::encode([7u8; 32]));
    let list = StoreOp::List {
        prefix: format!("jobs/{j}/checkpoints"),
        delimiter: true,
        continuation: None,
    };
    for op in [
        get(spec.clone()),
        list,
        get(latest.clone()),
        get(format!("jobs/{j}/checkpoints/{}/files/sub/b", key(40, 1))),
        get(format!(
            "jobs/{j}/checkpoints/{}/checkpoint.json",
            key(50, 1)
        )),
    ] {
        assert_eq!(authorize(&op, &standby), Ok(()), "{op:?}");
    }
    for op in [
        // Same step, another generation's upload (never attested).
        get(format!("jobs/{j}/checkpoints/{}/files/a", key(40, 2))),
        get(format!("jobs/{j}/checkpoints/{}/files/a", key(30, 1))),
        get(format!("jobs/{j}/checkpoints/{}/files/a", key(50, 1))),
        put(latest.clone()),
        StoreOp::Delete {
            path: latest.clone(),
        },
        StoreOp::Copy {
            path: format!("jobs/{j}/checkpoints/{}/files/a", key(50, 1)),
            from: latest.clone(),
        },
        put(spec),
        get(format!("users/{}/train.csv", w.owner)),
        get(format!("jobs/{j}/output/g1/model.bin")),
        get(format!("jobs/{j}/logs/g1/0.log")),
    ] {
        assert!(authorize(&op, &standby).is_err(), "{op:?}");
    }
    // A job with nothing attested yet: nothing to read but the listing.
    let mut fresh = w.jobs[0].1.clone();
    fresh.last_checkpoint = None;
    let unattested = [(j, fresh)];
    let early = Caller::Node {
        node: Pubkey::new_unique(),
        jobs: &[],
        checking: &[],
        standby: &unattested,
        inputs: &w.inputs,
    };
    let refused = authorize(&get(latest.clone()), &early).unwrap_err();
    assert!(refused.contains("none yet"), "{refused}");
    // Standing by for another job opens nothing of this one.
    let mut other = w.jobs[0].1.clone();
    other.spec_hash = [9; 32];
    let elsewhere = [(Pubkey::new_unique(), other)];
    let stranger = Caller::Node {
        node: Pubkey::new_unique(),
        jobs: &[],
        checking: &[],
        standby: &elsewhere,
        inputs: &w.inputs,
    };
    assert!(authorize(&get(latest), &stranger).is_err());
    assert!(
        authorize(
            &get(format!("specs/{}.json", hex::encode([7u8; 32]))),
            &stranger
        )
        .is_err()
    );
}
