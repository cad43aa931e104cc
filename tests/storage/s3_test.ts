// S3Store against a real S3 endpoint (Ceph RGW from scripts/ceph.sh in CI): the ObjectStore
// contract, then what is particular to S3 (multipart, abort, conditional writes, retries).
import { s3Fixture, s3Ignore } from "../_s3.ts";
import { testObjectStore } from "./_contract.ts";

// A 1 MiB part size, so the contract's writer tests go through multipart uploads of many parts;
// smaller objects take the one-PUT path.
testObjectStore("S3Store", () => s3Fixture({ partSize: 2 ** 20, concurrency: 3 }), {
  ignore: s3Ignore,
  sanitize: false,
});
