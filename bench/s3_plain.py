#!/usr/bin/env python3
"""A plain S3 client's transfer of the same bytes, beside MCJS's checkpoint
pipeline (orchestrator/runtime/benches/store_throughput.rs runs it): boto3's
managed transfers, 8 threads, 16 MiB parts, on the S3 server the benchmark
started. Prints one JSON object: seconds per repetition of each operation.

    s3_plain.py ENDPOINT BUCKET KEY_ID SECRET REPS FILE...

upload: every FILE put under plain/<name>; download: each got back into a
fresh directory; download+hash: the same, then sha256 of each file (what a
client that verifies must do at least).
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config


def main() -> None:
    endpoint, bucket, key_id, secret, reps = sys.argv[1:6]
    files = sys.argv[6:]
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=16),
    )
    transfer = TransferConfig(
        multipart_threshold=16 << 20, multipart_chunksize=16 << 20, max_concurrency=8, use_threads=True
    )
    times = {"upload": [], "download": [], "download_hash": []}
    for _ in range(int(reps)):
        start = time.perf_counter()
        for f in files:
            s3.upload_file(f, bucket, "plain/" + os.path.basename(f), Config=transfer)
        times["upload"].append(time.perf_counter() - start)
        for op in ("download", "download_hash"):
            target = tempfile.mkdtemp(prefix="plain-", dir=os.environ.get("MCJS_BENCH_DIR"))
            start = time.perf_counter()
            for f in files:
                path = os.path.join(target, os.path.basename(f))
                s3.download_file(bucket, "plain/" + os.path.basename(f), path, Config=transfer)
                if op == "download_hash":
                    h = hashlib.sha256()
                    with open(path, "rb") as got:
                        for block in iter(lambda: got.read(8 << 20), b""):
                            h.update(block)
            times[op].append(time.perf_counter() - start)
            shutil.rmtree(target)
    for f in files:
        s3.delete_object(Bucket=bucket, Key="plain/" + os.path.basename(f))
    print(json.dumps(times))


if __name__ == "__main__":
    main()
