use super::*;
use mcjs::state::{CheckpointRecord, JobRequirements, JobTerms};

mod standby;

fn job(owner: Pubkey, node: Pubkey, state: JobState, generation: u32) -> Job {
    Job {
        owner,
        state,
        node: Some(node),
        provider: None,
        job_id: 1,
        spec_hash: [7; 32],
        terms: JobTerms {
            checkpoint_interval_secs: 60,
            max_duration_secs: 3600,
            deadline: None,
            max_price_per_gpu_hour: 2,
            restart_budget: 3,
        },
        bond: 1,
        paid: 0,
        generation,
        rate_per_hour: 1,
        last_checkpoint: Some(CheckpointRecord {
            hash: [1; 32],
            epoch: 0,
            step: 40,
            time: 0,
            generation: 1,
        }),
        checkpoint_chain: [0; 32],
        checkpoint_count: 1,
        progress_mark: 0,
        accrued: 0,
        billed_secs: 0,
        restarts_used: 0,
        output_hash: None,
        submitted_at: 0,
        first_running_at: None,
        finished_at: None,
        refund_account: Pubkey::new_unique(),
        bump: 0,
        vault_bump: 0,
        requirements: JobRequirements {
            gpu_count: 1,
            min_vram_mib: 0,
            min_compute_capability: 0,
            gpu_models: Vec::new(),
            min_checkpoint_write_mibps: 0,
            attested: false,
        },
        last_failure: None,
        compensated: 0,
        verification_ppm: 0,
        prev_checkpoint: None,
        last_attest_slot: 0,
        last_interval_amount: 0,
        open_verifications: 0,
        holds_payment: false,
        held: 0,
        live_segments: 0,
        barred_provider: None,
        last_opened_interval: 0,
        checks_settled_at: 0,
        assignment_earned: 0,
        restore_floor: None,
        fatal_claim: None,
    }
}

fn key(step: u64, generation: u32) -> String {
    format!("{step:020}-g{generation}-0123456789abcdef")
}

struct World {
    owner: Pubkey,
    node: Pubkey,
    job: Pubkey,
    jobs: Vec<(Pubkey, Job)>,
    /// What the job's spec names in `users/`.
    inputs: Vec<SpecInput>,
}

impl World {
    /// The world's node, checking nothing, as the gateway sees its request.
    fn node_caller(&self) -> Caller<'_> {
        Caller::Node {
            node: self.node,
            jobs: &self.jobs,
            checking: &[],
            standby: &[],
            inputs: &self.inputs,
        }
    }
}

fn world(state: JobState) -> World {
    let (owner, node, job_key) = (
        Pubkey::new_unique(),
        Pubkey::new_unique(),
        Pubkey::new_unique(),
    );
    World {
        owner,
        node,
        job: job_key,
        jobs: vec![(job_key, job(owner, node, state, 2))],
        inputs: ["train.csv", "data/train.csv", "data/a"]
            .into_iter()
            .map(|p| SpecInput {
                spec_hash: [7u8; 32],
                path: format!("users/{owner}/{p}"),
            })
            .collect(),
    }
}

fn get(path: String) -> StoreOp {
    StoreOp::Get { path }
}
fn put(path: String) -> StoreOp {
    StoreOp::Put { path, size: None }
}

/// A node named to check an interval reads the job's spec, the
/// interval's start and its owner's data, and writes nothing; the
/// checkpoints after the start (the end it must reproduce itself) and
/// the output stay closed.
#[test]
fn a_named_checker_reads_only_the_intervals_start_and_writes_nothing() {
    let w = world(JobState::Running { since: 0 });
    let checking = [Checking {
        job: w.job,
        account: w.jobs[0].1.clone(),
        interval: 4,
        start_step: Some(40),
    }];
    let checker = Caller::Node {
        node: Pubkey::new_unique(),
        jobs: &[],
        checking: &checking,
        standby: &[],
        inputs: &w.inputs,
    };
    let j = w.job;
    let spec = format!("specs/{}.json", hex::encode([7u8; 32]));
    let start = format!("jobs/{j}/checkpoints/{}/files/a", key(40, 2));
    let end = format!("jobs/{j}/checkpoints/{}/files/a", key(50, 2));
    let end_descriptor = format!("jobs/{j}/checkpoints/{}/checkpoint.json", key(50, 2));
    let list = StoreOp::List {
        prefix: format!("jobs/{j}/checkpoints"),
        delimiter: true,
        continuation: None,
    };
    assert_eq!(authorize(&get(spec.clone()), &checker), Ok(()));
    assert_eq!(authorize(&get(start.clone()), &checker), Ok(()));
    assert_eq!(authorize(&list, &checker), Ok(()));
    // Descriptors carry plain hashes only: listing them is how a
    // restore finds the start.
    assert_eq!(authorize(&get(end_descriptor), &checker), Ok(()));
    assert_eq!(
        authorize(&get(format!("users/{}/train.csv", w.owner)), &checker),
        Ok(())
    );
    for op in [
        get(end),
        get(format!("jobs/{j}/checkpoints/{}/files/sub/b", key(50, 2))),
        put(spec),
        put(start.clone()),
        StoreOp::Delete { path: start },
        get(format!("jobs/{j}/output/g2/model.bin")),
        put(format!("jobs/{j}/output/g2/model.bin")),
    ] {
        assert!(authorize(&op, &checker).is_err(), "{op:?}");
    }
}

/// A node named for several intervals of one job reads the start of the
/// earliest it has not answered, and no other: the start of the next
/// interval is the end it must reproduce. Once it answers (the check leaves
/// its list), the next start opens.
#[test]
fn a_checker_of_several_intervals_of_a_job_reads_only_the_earliest_start() {
    let w = world(JobState::Running { since: 0 });
    let j = w.job;
    let check = |interval: u32, start: u64| Checking {
        job: w.job,
        account: w.jobs[0].1.clone(),
        interval,
        start_step: Some(start),
    };
    let start = |step: u64| get(format!("jobs/{j}/checkpoints/{}/files/a", key(step, 2)));
    let as_checker = |checking: &[Checking], op: &StoreOp| {
        authorize(
            op,
            &Caller::Node {
                node: Pubkey::new_unique(),
                jobs: &[],
                checking,
                standby: &[],
                inputs: &w.inputs,
            },
        )
    };
    // Listed in any order: the chain's listing has none.
    let both = [check(5, 50), check(4, 40)];
    assert_eq!(as_checker(&both, &start(40)), Ok(()));
    let refused = as_checker(&both, &start(50)).unwrap_err();
    assert!(refused.contains("earliest interval"), "{refused}");
    // Interval 4 answered: it leaves the list, and 5's start opens.
    let after = [check(5, 50)];
    assert_eq!(as_checker(&after, &start(50)), Ok(()));
    assert!(as_checker(&after, &start(40)).is_err());
}

/// A verified job's latest interval must stay checkable: its start is
/// not deleted (a liar would otherwise make its check impossible), and
/// nothing is while a check is open.
#[test]
fn a_verified_jobs_interval_start_cannot_be_deleted() {
    let mut w = world(JobState::Running { since: 0 });
    let job = &mut w.jobs[0].1;
    job.verification_ppm = 100_000;
    job.prev_checkpoint = job.last_checkpoint;
    job.last_checkpoint = Some(CheckpointRecord {
        hash: [2; 32],
        epoch: 0,
        step: 60,
        time: 0,
        generation: 2,
    });
    let j = w.job;
    let delete = |step: u64, generation: u32| StoreOp::Delete {
        path: format!(
            "jobs/{j}/checkpoints/{}/checkpoint.json",
            key(step, generation)
        ),
    };
    let me = w.node_caller();
    assert_eq!(
        authorize(&delete(30, 1), &me),
        Ok(()),
        "older than the interval"
    );
    assert!(
        authorize(&delete(40, 1), &me).is_err(),
        "the interval's start"
    );
    assert!(
        authorize(&delete(50, 2), &me).is_err(),
        "inside the interval, own generation"
    );
    assert!(authorize(&delete(60, 2), &me).is_err(), "the attested end");
    assert_eq!(
        authorize(&delete(70, 2), &me),
        Ok(()),
        "its own unattested upload"
    );
    w.jobs[0].1.open_verifications = 1;
    let me = w.node_caller();
    assert!(authorize(&delete(30, 1), &me).is_err(), "a check is open");
}

/// Where a lie found in the latest interval sends the job back (its
/// assignment's start, or its latest confirmed end) stays, however old: a
/// node that expects to be caught cannot delete it to take the job down
/// with it. Older checkpoints around it still go.
#[test]
fn a_verified_jobs_restore_floor_cannot_be_deleted_however_old() {
    let mut w = world(JobState::Running { since: 0 });
    let record = |step: u64, generation: u32| CheckpointRecord {
        hash: [step as u8; 32],
        epoch: 0,
        step,
        time: 0,
        generation,
    };
    let job = &mut w.jobs[0].1;
    job.verification_ppm = 100_000;
    // The assignment (generation 2) started from generation 1's step 20
    // and has attested 40, 60, 80 and 100 since, none confirmed.
    job.restore_floor = Some(record(20, 1));
    job.prev_checkpoint = Some(record(80, 2));
    job.last_checkpoint = Some(record(100, 2));
    let j = w.job;
    let delete = |step: u64, generation: u32| StoreOp::Delete {
        path: format!(
            "jobs/{j}/checkpoints/{}/files/model.bin",
            key(step, generation)
        ),
    };
    let me = w.node_caller();
    let refused = authorize(&delete(20, 1), &me).expect_err("the restore floor");
    assert!(refused.contains("goes back to"), "{refused}");
    for (step, generation) in [(10, 1), (20, 2), (40, 2), (60, 2)] {
        assert_eq!(
            authorize(&delete(step, generation), &me),
            Ok(()),
            "step {step} of generation {generation} is older than the interval and not the floor"
        );
    }
    assert!(
        authorize(&delete(80, 2), &me).is_err(),
        "the interval's start"
    );
    // A check confirmed the assignment up to 60: the floor moves there,
    // and the assignment's start may go.
    w.jobs[0].1.restore_floor = Some(record(60, 2));
    let me = w.node_caller();
    assert_eq!(authorize(&delete(20, 1), &me), Ok(()));
    assert!(authorize(&delete(60, 2), &me).is_err(), "the confirmed end");
}

#[test]
fn the_assigned_node_reads_the_job_and_writes_only_its_generation() {
    let w = world(JobState::Running { since: 0 });
    let me = w.node_caller();
    let j = w.job;
    let spec = format!("specs/{}.json", hex::encode([7u8; 32]));
    assert_eq!(authorize(&get(spec.clone()), &me), Ok(()));
    assert!(
        authorize(&put(spec), &me).is_err(),
        "a node never writes a spec"
    );
    assert_eq!(
        authorize(
            &get(format!("jobs/{j}/checkpoints/{}/files/a", key(40, 1))),
            &me
        ),
        Ok(())
    );
    let list = StoreOp::List {
        prefix: format!("jobs/{j}/checkpoints"),
        delimiter: true,
        continuation: None,
    };
    assert_eq!(authorize(&list, &me), Ok(()));
    let own = format!("jobs/{j}/checkpoints/{}/files/a", key(50, 2));
    assert_eq!(authorize(&put(own.clone()), &me), Ok(()));
    for op in [
        StoreOp::CreateMultipart { path: own.clone() },
        StoreOp::UploadPart {
            path: own.clone(),
            upload_id: "u".into(),
            part: 1,
            size: None,
        },
        StoreOp::Delete { path: own },
    ] {
        assert_eq!(authorize(&op, &me), Ok(()), "{op:?}");
    }
    // Another generation's checkpoints: neither overwritten nor, unless
    // older than the last attested step, deleted.
    let old = format!("jobs/{j}/checkpoints/{}/files/a", key(40, 1));
    assert!(authorize(&put(old.clone()), &me).is_err());
    assert!(authorize(&StoreOp::Delete { path: old }, &me).is_err());
    let older = format!("jobs/{j}/checkpoints/{}/checkpoint.json", key(30, 1));
    assert_eq!(
        authorize(
            &StoreOp::Delete {
                path: older.clone()
            },
            &me
        ),
        Ok(())
    );
    assert!(authorize(&put(older), &me).is_err());
    assert!(
        authorize(&put(format!("jobs/{j}/checkpoints/junk/x")), &me).is_err(),
        "a key without a generation"
    );
    // Output is fenced by generation, as checkpoints are.
    assert_eq!(
        authorize(&put(format!("jobs/{j}/output/g2/files/m")), &me),
        Ok(())
    );
    for other in ["g1", "g3", "files", "g"] {
        assert!(
            authorize(&put(format!("jobs/{j}/output/{other}/files/m")), &me).is_err(),
            "{other}"
        );
    }
    assert_eq!(
        authorize(&get(format!("users/{}/data/train.csv", w.owner)), &me),
        Ok(())
    );
    assert!(authorize(&put(format!("users/{}/data/train.csv", w.owner)), &me).is_err());
    assert!(authorize(&get(format!("users/{}/x/y", Pubkey::new_unique())), &me).is_err());
    assert!(authorize(&get("admin/secrets".into()), &me).is_err());
}

#[test]
fn any_other_node_and_a_node_whose_job_moved_on_are_refused() {
    let w = world(JobState::Running { since: 0 });
    let j = w.job;
    let stranger = Pubkey::new_unique();
    // A stranger node's jobs list (as the chain gives it) does not hold
    // the job; even a forged list naming it is checked against the node.
    for jobs in [&[][..], &w.jobs[..]] {
        let other = Caller::Node {
            node: stranger,
            jobs,
            checking: &[],
            standby: &[],
            inputs: &w.inputs,
        };
        for op in [
            get(format!("jobs/{j}/checkpoints/{}/files/a", key(40, 1))),
            put(format!("jobs/{j}/checkpoints/{}/files/a", key(50, 2))),
            put(format!("jobs/{j}/output/g2/files/m")),
            get(format!("jobs/{j}/output/g2/output.json")),
            get(format!("specs/{}.json", hex::encode([7u8; 32]))),
            get(format!("users/{}/data/a", w.owner)),
        ] {
            assert!(authorize(&op, &other).is_err(), "{op:?}");
        }
    }
    for state in [
        JobState::Recovering { since: 0 },
        JobState::Completed { at: 0 },
        JobState::Pending { since: 0 },
    ] {
        let w = world(state);
        let me = w.node_caller();
        assert!(
            authorize(
                &put(format!("jobs/{}/checkpoints/{}/x", w.job, key(50, 2))),
                &me
            )
            .is_err(),
            "{state:?}"
        );
        assert!(authorize(&put(format!("jobs/{}/output/g2/x", w.job)), &me).is_err());
    }
}

#[test]
fn an_owner_reads_its_jobs_and_writes_only_its_own_data() {
    let w = world(JobState::Completed { at: 0 });
    let j = w.job;
    let me = Caller::Owner {
        owner: w.owner,
        jobs: &w.jobs,
    };
    assert_eq!(
        authorize(&get(format!("jobs/{j}/output/g2/output.json")), &me),
        Ok(())
    );
    assert_eq!(
        authorize(
            &get(format!("jobs/{j}/checkpoints/{}/files/a", key(40, 1))),
            &me
        ),
        Ok(())
    );
    assert_eq!(
        authorize(&get(format!("specs/{}.json", hex::encode([7u8; 32]))), &me),
        Ok(())
    );
    assert!(authorize(&put(format!("jobs/{j}/output/g2/files/model")), &me).is_err());
    assert!(
        authorize(
            &StoreOp::Delete {
                path: format!("jobs/{j}/output/g2/output.json")
            },
            &me
        )
        .is_err()
    );
    assert!(authorize(&put(format!("specs/{}.json", hex::encode([7u8; 32]))), &me).is_err());
    assert_eq!(
        authorize(&put(format!("users/{}/data/a.csv", w.owner)), &me),
        Ok(())
    );
    assert!(
        authorize(
            &put(format!("users/{}/data/a.csv", Pubkey::new_unique())),
            &me
        )
        .is_err()
    );

    let stranger = Caller::Owner {
        owner: Pubkey::new_unique(),
        jobs: &w.jobs,
    };
    assert!(authorize(&get(format!("jobs/{j}/output/g2/output.json")), &stranger).is_err());
    assert!(
        authorize(
            &get(format!("specs/{}.json", hex::encode([7u8; 32]))),
            &stranger
        )
        .is_err()
    );
}

/// Grants are per job: a node reads of `users/` exactly the objects the
/// specs of its own jobs name, each under that job's owner; not the
/// owner's other objects, not what another job of the same owner names,
/// not another wallet's object a spec names, and never a listing.
#[test]
fn a_node_reads_only_the_inputs_its_jobs_specs_name_under_their_owner() {
    let w = world(JobState::Running { since: 0 });
    let stranger = Pubkey::new_unique();
    // The same owner's second job, on another node, with its own spec.
    let mut elsewhere = job(
        w.owner,
        Pubkey::new_unique(),
        JobState::Running { since: 0 },
        1,
    );
    elsewhere.spec_hash = [8; 32];
    let mut jobs = w.jobs.clone();
    jobs.push((Pubkey::new_unique(), elsewhere));
    let inputs = [
        SpecInput {
            spec_hash: [7; 32],
            path: format!("users/{}/data/a", w.owner),
        },
        // The spec of this node's job names another wallet's object.
        SpecInput {
            spec_hash: [7; 32],
            path: format!("users/{stranger}/private/b"),
        },
        // The owner's other job names its own secret.
        SpecInput {
            spec_hash: [8; 32],
            path: format!("users/{}/secret", w.owner),
        },
    ];
    let me = Caller::Node {
        node: w.node,
        jobs: &jobs,
        checking: &[],
        standby: &[],
        inputs: &inputs,
    };
    assert_eq!(
        authorize(&get(format!("users/{}/data/a", w.owner)), &me),
        Ok(())
    );
    assert_eq!(
        authorize(
            &StoreOp::Head {
                path: format!("users/{}/data/a", w.owner)
            },
            &me
        ),
        Ok(())
    );
    for op in [
        get(format!("users/{}/data/other", w.owner)),
        get(format!("users/{}/secret", w.owner)),
        get(format!("users/{stranger}/private/b")),
        StoreOp::List {
            prefix: format!("users/{}/data/a", w.owner),
            delimiter: false,
            continuation: None,
        },
        StoreOp::List {
            prefix: format!("users/{}/", w.owner),
            delimiter: true,
            continuation: None,
        },
    ] {
        let refused = authorize(&op, &me);
        assert!(refused.is_err(), "{op:?}");
    }
}

/// What a spec grants comes from its `s3://` inputs in this store only:
/// not its https inputs, not another bucket's or another prefix's
/// objects, not objects outside `users/`.
#[test]
fn a_specs_inputs_are_its_s3_objects_in_this_store_under_users() {
    let location = mcjs_protocol::store::S3Location {
        bucket: "mcjs".into(),
        prefix: "prod".into(),
        endpoint: None,
        region: "us-east-1".into(),
        path_style: true,
    };
    let owner = Pubkey::new_unique();
    let mut spec: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../examples/specs/bulk-inference.json"
    ))
    .unwrap();
    let template = spec["data"][0].clone();
    let uris = [
        format!("s3://mcjs/prod/users/{owner}/audio%2Dset.tar"),
        "s3://mcjs/prod/specs/aa.json".to_string(),
        format!("s3://mcjs/staging/users/{owner}/a.tar"),
        format!("s3://other-bucket/prod/users/{owner}/a.tar"),
        format!("https://example.org/prod/users/{owner}/a.tar"),
    ];
    spec["data"] = uris
        .iter()
        .enumerate()
        .map(|(i, uri)| {
            let mut input = template.clone();
            input["name"] = format!("in{i}").into();
            input["uri"] = uri.as_str().into();
            input["size"] = "1GB".into();
            input
        })
        .collect();
    let spec = mcjs_spec::JobSpec::from_value(&spec).expect("a valid spec");
    assert_eq!(
        spec_inputs([3; 32], &spec, &location),
        vec![SpecInput {
            spec_hash: [3; 32],
            path: format!("users/{owner}/audio-set.tar"),
        }]
    );
}

/// A job's printed lines are its owner's to read: its node writes (and
/// rotates) its own generation's chunks; no other node, no other wallet,
/// and not the owner itself writes them; a node reads no other job's.
#[test]
fn a_jobs_logs_are_written_by_its_node_and_read_by_its_owner_alone() {
    let w = world(JobState::Running { since: 0 });
    let j = w.job;
    let chunk = |g: u32| format!("jobs/{j}/logs/g{g}/1765000000000-000003.jsonl");
    let list = |prefix: String| StoreOp::List {
        prefix,
        delimiter: false,
        continuation: None,
    };
    let me = w.node_caller();
    assert_eq!(authorize(&put(chunk(2)), &me), Ok(()));
    assert_eq!(authorize(&StoreOp::Delete { path: chunk(2) }, &me), Ok(()));
    assert!(
        authorize(&put(chunk(1)), &me).is_err(),
        "an earlier generation's"
    );
    assert!(authorize(&StoreOp::Delete { path: chunk(1) }, &me).is_err());
    let other = Caller::Node {
        node: Pubkey::new_unique(),
        jobs: &w.jobs,
        checking: &[],
        standby: &[],
        inputs: &w.inputs,
    };
    for op in [put(chunk(2)), get(chunk(2)), list(format!("jobs/{j}/logs"))] {
        assert!(authorize(&op, &other).is_err(), "{op:?}");
    }

    let owner = Caller::Owner {
        owner: w.owner,
        jobs: &w.jobs,
    };
    assert_eq!(authorize(&get(chunk(1)), &owner), Ok(()));
    assert_eq!(authorize(&list(format!("jobs/{j}/logs")), &owner), Ok(()));
    assert!(authorize(&put(chunk(2)), &owner).is_err());
    assert!(authorize(&StoreOp::Delete { path: chunk(1) }, &owner).is_err());
    let stranger = Caller::Owner {
        owner: Pubkey::new_unique(),
        jobs: &w.jobs,
    };
    for op in [get(chunk(1)), list(format!("jobs/{j}/logs"))] {
        assert!(authorize(&op, &stranger).is_err(), "{op:?}");
    }
    // Once the job left the node, the node writes no more of it.
    let w = world(JobState::Completed { at: 0 });
    let me = w.node_caller();
    assert!(authorize(&put(chunk(2)), &me).is_err());
}

/// A job's output is written by its node and never deleted, by it or
/// anyone: the gateway's grants for it are create-only, so what the owner
/// pays for stays as the node stored it.
#[test]
fn a_jobs_output_is_written_by_its_node_and_deleted_by_nobody() {
    let w = world(JobState::Running { since: 0 });
    let j = w.job;
    let me = w.node_caller();
    let file = format!("jobs/{j}/output/g2/0123456789abcdef/files/model.bin");
    assert_eq!(authorize(&put(file.clone()), &me), Ok(()));
    for path in [file, format!("jobs/{j}/output/g2/output.json")] {
        assert!(
            authorize(&StoreOp::Delete { path: path.clone() }, &me).is_err(),
            "{path}"
        );
    }
}

/// A copy inside the store goes from one of the job's checkpoints to one of
/// its node's own generation, by that node: never into another generation,
/// out of another job, from or to anything but a checkpoint, by a checker
/// or by an owner.
#[test]
fn a_copy_goes_between_checkpoints_of_one_job_into_the_nodes_own_generation() {
    let w = world(JobState::Running { since: 0 });
    let me = w.node_caller();
    let j = w.job;
    let copy = |from: String, path: String| StoreOp::Copy { path, from };
    let older = format!("jobs/{j}/checkpoints/{}/files/base.bin", key(40, 1));
    let own = format!("jobs/{j}/checkpoints/{}/files/base.bin", key(50, 2));
    let own_earlier = format!("jobs/{j}/checkpoints/{}/files/base.bin", key(45, 2));
    assert_eq!(
        authorize(&copy(own_earlier.clone(), own.clone()), &me),
        Ok(())
    );
    assert_eq!(authorize(&copy(older.clone(), own.clone()), &me), Ok(()));
    let other_job = Pubkey::new_unique();
    for (from, to) in [
        // Into another generation's checkpoint.
        (own.clone(), older.clone()),
        // Out of another job, or into one.
        (
            format!("jobs/{other_job}/checkpoints/{}/files/base.bin", key(40, 2)),
            own.clone(),
        ),
        (
            own_earlier.clone(),
            format!("jobs/{other_job}/checkpoints/{}/files/base.bin", key(50, 2)),
        ),
        // From or to anything but a checkpoint.
        (format!("users/{}/data/train.csv", w.owner), own.clone()),
        (
            format!("specs/{}.json", hex::encode([7u8; 32])),
            own.clone(),
        ),
        (
            own_earlier.clone(),
            format!("jobs/{j}/output/g2/files/model.bin"),
        ),
        (own_earlier.clone(), format!("jobs/{j}/logs/g2/1-0.jsonl")),
        // The job's whole directory.
        (format!("jobs/{j}/checkpoints"), own.clone()),
    ] {
        let op = copy(from, to);
        assert!(authorize(&op, &me).is_err(), "{op:?}");
    }
    let checking = [Checking {
        job: w.job,
        account: w.jobs[0].1.clone(),
        interval: 4,
        start_step: Some(45),
    }];
    let checker = Caller::Node {
        node: Pubkey::new_unique(),
        jobs: &[],
        checking: &checking,
        standby: &[],
        inputs: &w.inputs,
    };
    assert!(
        authorize(&copy(own_earlier.clone(), own.clone()), &checker).is_err(),
        "a checker writes nothing"
    );
    let owner = Caller::Owner {
        owner: w.owner,
        jobs: &w.jobs,
    };
    assert!(authorize(&copy(own_earlier, own), &owner).is_err());
}
