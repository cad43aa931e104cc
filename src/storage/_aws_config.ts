// The AWS settings every AWS tool reads: the environment variables, then the shared files
// `~/.aws/credentials` and `~/.aws/config` (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE), in the
// profile AWS_PROFILE names (else "default"), with the precedence of the AWS CLI and SDKs:
// https://docs.aws.amazon.com/sdkref/latest/guide/file-format.html and
// https://docs.aws.amazon.com/sdkref/latest/guide/settings-reference.html.
//
// - credentials: the environment's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with
//   AWS_SESSION_TOKEN), else the profile's aws_access_key_id, aws_secret_access_key and
//   aws_session_token from the credentials file (`[name]`), else from the config file
//   (`[profile name]`, `[default]`); a set is taken whole from one place, never mixed;
// - region: AWS_REGION, AWS_DEFAULT_REGION, then the config file's `region`;
// - endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then the config file's `endpoint_url` for s3
//   (in the `[services name]` section the profile's `services` names), then its `endpoint_url`.
//
// The files are INI as the AWS CLI reads them: `[section]` lines, `key = value` lines (the key's
// case ignored, the value trimmed), comments on lines of their own starting with `#` or `;`, and
// indented `sub = value` lines under a `key =` with no value (`s3 =` then `  endpoint_url = ...`).
// A line that is none of these is a SyntaxError naming the file and the line: a half-read profile
// would sign with the wrong keys. No npm package: the format is small and a parser of ours keeps
// the core free of one more dependency (docs/storage.md).
import { files, HAS_FILES } from "../runtime/files.ts";
import { OsErrors } from "../runtime/errors.ts";

/** A parsed INI file: section name to its keys (lower case) and values; `a.b` for a sub-key. */
export type IniSections = Map<string, Map<string, string>>;

/**
 * Parses an AWS shared config or credentials file; `file` names it in errors.
 *
 * @example
 * ```ts
 * import { parseIni } from "./_aws_config.ts";
 * import assert from "node:assert/strict";
 * const ini = parseIni("[profile dev]\nregion = eu-west-1\ns3 =\n  endpoint_url = http://127.0.0.1:7480\n", "config");
 * assert.equal(ini.get("profile dev")?.get("s3.endpoint_url"), "http://127.0.0.1:7480");
 * ```
 */
export function parseIni(text: string, file: string): IniSections {
  const sections: IniSections = new Map();
  let section: Map<string, string> | undefined;
  let parent: string | undefined; // a `key =` with no value, whose indented lines follow
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const where = `${file} line ${i + 1}`;
    const header = /^\[([^\]]*)\]$/.exec(line);
    if (header) {
      const name = header[1]!.trim().replace(/\s+/g, " ");
      if (name === "") throw new SyntaxError(`Cannot read AWS settings: ${where} has an empty section name`);
      section = sections.get(name) ?? new Map();
      sections.set(name, section);
      parent = undefined;
      continue;
    }
    const eq = line.indexOf("=");
    if (eq <= 0) {
      throw new SyntaxError(`Cannot read AWS settings: ${where} is neither [section] nor key = value: ${raw}`);
    }
    if (section === undefined) {
      throw new SyntaxError(`Cannot read AWS settings: ${where} sets a value before any [section]`);
    }
    const key = line.slice(0, eq).trim().toLowerCase();
    const value = line.slice(eq + 1).trim();
    if (/^\s/.test(raw) && parent !== undefined) {
      section.set(`${parent}.${key}`, value);
      continue;
    }
    section.set(key, value);
    parent = value === "" ? key : undefined;
  }
  return sections;
}

/** Where a setting came from, for messages: an environment variable or a file's section. */
export type SettingSource = string;

/** The S3 settings the environment and the shared files give; each absent where neither does. */
export interface AwsSettings {
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string; source: SettingSource };
  region?: string;
  endpoint?: string;
  /** The profile read, and whether it was named (AWS_PROFILE or an option) rather than the default. */
  profile: string;
  /** The shared files and what became of each: read, absent, or unreadable (and why). */
  files: { path: string; state: "read" | "absent" | string }[];
}

/** How the settings are looked up: the environment, and the profile an option names. */
export interface AwsLookup {
  env: (name: string) => string | undefined;
  /** A profile named by the caller (S3StoreOptions.profile), before AWS_PROFILE. */
  profile?: string | undefined;
}

/** Whether this process may read `path` without asking (Deno's permissions; elsewhere it may). */
function readable(path: string): boolean {
  try {
    const query = globalThis.Deno?.permissions.querySync;
    return query === undefined || query({ name: "read", path }).state === "granted";
  } catch {
    return true;
  }
}

async function readIni(path: string): Promise<{ ini?: IniSections; state: string }> {
  if (!HAS_FILES) return { state: "absent" };
  if (!readable(path)) return { state: "this process may not read it (run with --allow-read)" };
  let text: string;
  try {
    text = await files.readTextFile(path);
  } catch (e) {
    if (e instanceof OsErrors.NotFound || e instanceof OsErrors.NotADirectory) return { state: "absent" };
    return { state: `unreadable: ${e instanceof Error ? e.message : e}` };
  }
  return { ini: parseIni(text, path), state: "read" };
}

function home(env: AwsLookup["env"]): string | undefined {
  return env("HOME") || env("USERPROFILE") || undefined;
}

function fileFromEnv(env: AwsLookup["env"], variable: string, name: string): string | undefined {
  const set = env(variable);
  if (set) return set.startsWith("~/") && home(env) ? `${home(env)}${set.slice(1)}` : set;
  const dir = home(env);
  return dir === undefined ? undefined : `${dir}/.aws/${name}`;
}

function keysOf(section: Map<string, string> | undefined, source: string): AwsSettings["credentials"] {
  const accessKeyId = section?.get("aws_access_key_id");
  const secretAccessKey = section?.get("aws_secret_access_key");
  if (!accessKeyId || !secretAccessKey) return undefined;
  const sessionToken = section?.get("aws_session_token") || section?.get("aws_security_token");
  return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}), source };
}

/**
 * The S3 settings from the environment and the shared files. A profile named by AWS_PROFILE (or
 * `lookup.profile`) that neither file holds is a TypeError naming the profile and both files.
 *
 * @example
 * ```ts
 * import { awsSettings } from "./_aws_config.ts";
 * import assert from "node:assert/strict";
 * const env: Record<string, string> = { AWS_ACCESS_KEY_ID: "id", AWS_SECRET_ACCESS_KEY: "secret", AWS_REGION: "eu-west-1" };
 * const s = await awsSettings({ env: (k) => env[k] });
 * assert.equal(s.credentials?.accessKeyId, "id");
 * assert.equal(s.region, "eu-west-1");
 * ```
 */
export async function awsSettings(lookup: AwsLookup): Promise<AwsSettings> {
  const { env } = lookup;
  const named = lookup.profile ?? (env("AWS_PROFILE") || env("AWS_DEFAULT_PROFILE") || undefined);
  const profile = named ?? "default";
  const credentialsPath = fileFromEnv(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
  const configPath = fileFromEnv(env, "AWS_CONFIG_FILE", "config");
  const credentialsFile = credentialsPath === undefined ? { state: "absent" } : await readIni(credentialsPath);
  const configFile = configPath === undefined ? { state: "absent" } : await readIni(configPath);
  const fileStates = [
    ...(credentialsPath === undefined ? [] : [{ path: credentialsPath, state: credentialsFile.state }]),
    ...(configPath === undefined ? [] : [{ path: configPath, state: configFile.state }]),
  ];
  const inCredentials = credentialsFile.ini?.get(profile);
  const configName = profile === "default" && !configFile.ini?.has("default") ? "profile default" : profile;
  const inConfig = configFile.ini?.get(profile === "default" ? configName : `profile ${profile}`);
  if (named !== undefined && named !== "default" && inCredentials === undefined && inConfig === undefined) {
    const by = lookup.profile !== undefined
      ? "S3StoreOptions.profile"
      : env("AWS_PROFILE")
      ? "AWS_PROFILE"
      : "AWS_DEFAULT_PROFILE";
    const where = fileStates.map((f) => f.state === "read" ? f.path : `${f.path} (${f.state})`).join(" nor ");
    throw new TypeError(
      `Cannot use the AWS profile ${JSON.stringify(named)} (${by}): it is in neither ${
        where || "shared file (no HOME)"
      }; ` +
        `add [${named}] to the credentials file or [profile ${named}] to the config file, or unset ${by}`,
    );
  }
  const envKeys = env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")
    ? {
      accessKeyId: env("AWS_ACCESS_KEY_ID")!,
      secretAccessKey: env("AWS_SECRET_ACCESS_KEY")!,
      ...(env("AWS_SESSION_TOKEN") ? { sessionToken: env("AWS_SESSION_TOKEN")! } : {}),
      source: "the environment (AWS_ACCESS_KEY_ID)",
    }
    : undefined;
  const credentials = envKeys ??
    keysOf(inCredentials, `${credentialsPath} [${profile}]`) ??
    keysOf(inConfig, `${configPath} [${profile === "default" ? configName : `profile ${profile}`}]`);
  const region = env("AWS_REGION") || env("AWS_DEFAULT_REGION") || inConfig?.get("region") || undefined;
  const services = inConfig?.get("services");
  const servicesEndpoint = services ? configFile.ini?.get(`services ${services}`)?.get("s3.endpoint_url") : undefined;
  const endpoint = env("AWS_ENDPOINT_URL_S3") || env("AWS_ENDPOINT_URL") || servicesEndpoint ||
    inConfig?.get("endpoint_url") || undefined;
  return {
    ...(credentials ? { credentials } : {}),
    ...(region ? { region } : {}),
    ...(endpoint ? { endpoint } : {}),
    profile,
    files: fileStates,
  };
}
