// Defaults of the S3 store that code which must not load it (an `s3://` address resolved
// lazily: src/storage/resolve.ts) needs to know: the one place they are defined.

/** Default multipart part size: 8 MiB (S3 requires at least 5 MiB for every part but the last). */
export const DEFAULT_S3_PART_SIZE = 8 * 1024 * 1024;
/** Default number of ranged GETs a whole-object read keeps in flight: 1 (one GET). */
export const DEFAULT_S3_READ_CONCURRENCY = 1;
