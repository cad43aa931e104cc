// The manager on S3 (Ceph RGW from scripts/ceph.sh in CI): the same suite as on the other stores,
// with a small part size so checkpoints go up as multipart uploads.
import { s3Fixture, s3Ignore } from "../_s3.ts";
import { managerOnStore } from "./_store_suite.ts";

managerOnStore("S3Store", () => s3Fixture({ partSize: 5 * 2 ** 20, concurrency: 2, prefix: "run" }), {
  ignore: s3Ignore,
  sanitize: false,
});
