// Validates rendered Kubernetes manifests against the API schemas of the npm
// packages kubernetes-models (built-in kinds) and
// @kubernetes-models/prometheus-operator (ServiceMonitor, PodMonitor).
//
//   node tests/deploy/validate.js NODE_MODULES_DIR FILE.yaml...
//
// Each YAML document is looked up by apiVersion and kind, constructed as its
// model class and validated; a kind no package models is an error.  The
// schemas allow unknown fields (Kubernetes' OpenAPI does), so a misspelt
// field would pass; validate.js also runs the schema's validator over a
// proxy that records which fields the validator looked at: a field it never
// looked at, in an object whose fields it did check, is reported as unknown.
// Objects the schema leaves free-form (no field looked at) are not judged.
// Prints one line per problem as "kind/name: message"; exits 1 on any.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, ...files] = process.argv.slice(2);
if (!modules || files.length === 0) {
  console.error("usage: validate.js NODE_MODULES_DIR FILE.yaml...");
  process.exit(2);
}

const load = (...parts) => import(pathToFileURL(join(modules, ...parts)).href);
const YAML = (await load("yaml", "dist", "index.js")).default;

// API group -> package holding its models
const packages = { "monitoring.coreos.com": "@kubernetes-models/prometheus-operator" };
function packageOf(group) {
  if (group === "" || !group.includes(".") || group.endsWith(".k8s.io")) return "kubernetes-models";
  return packages[group];
}

async function modelClass(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string") return undefined;
  const slash = apiVersion.lastIndexOf("/");
  const group = slash < 0 ? "" : apiVersion.slice(0, slash);
  const pkg = packageOf(group);
  if (!pkg) return undefined;
  const dir = group === "" ? [apiVersion] : [group, apiVersion.slice(slash + 1)];
  try {
    const mod = await load(pkg, ...dir, "index.js");
    return mod[kind];
  } catch {
    return undefined;
  }
}

// Deep copy of value whose objects record the fields read from them.
function tracked(value, seen) {
  if (Array.isArray(value)) return value.map((v) => tracked(v, seen));
  if (value === null || typeof value !== "object") return value;
  const copy = {};
  for (const [k, v] of Object.entries(value)) copy[k] = tracked(v, seen);
  const info = { reads: new Set(), enumerated: false };
  const proxy = new Proxy(copy, {
    get(t, key, r) {
      if (typeof key === "string") info.reads.add(key);
      return Reflect.get(t, key, r);
    },
    has(t, key) {
      if (typeof key === "string") info.reads.add(key);
      return Reflect.has(t, key);
    },
    ownKeys(t) {
      info.enumerated = true; // a map (additionalProperties): every key is checked
      return Reflect.ownKeys(t);
    },
  });
  seen.set(proxy, { copy, info });
  return proxy;
}

function unknownFields(root, seen) {
  const found = [];
  (function walk(value, path) {
    if (Array.isArray(value)) {
      value.forEach((v, i) => walk(v, `${path}[${i}]`));
      return;
    }
    const entry = value !== null && typeof value === "object" ? seen.get(value) : undefined;
    if (!entry) return;
    const { copy, info } = entry;
    const judged = !info.enumerated && info.reads.size > 0;
    for (const key of Object.keys(copy)) {
      if (judged && !info.reads.has(key)) found.push(`${path}.${key}`);
      walk(copy[key], `${path}.${key}`);
    }
  })(root, "");
  return found;
}

let objects = 0;
const problems = [];
for (const file of files) {
  const docs = YAML.parseAllDocuments(readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length) {
      problems.push(`${file}: ${doc.errors.map((e) => e.message).join("; ")}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue; // an empty document between separators
    objects++;
    const what = `${obj.kind ?? "?"}/${obj.metadata?.name ?? "?"}`;
    const Model = await modelClass(obj.apiVersion, obj.kind);
    if (!Model) {
      problems.push(`${what}: unknown kind ${obj.kind} in ${obj.apiVersion}`);
      continue;
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      problems.push(`${what}: ${e.message}`);
    }
    const seen = new Map();
    const proxy = tracked(obj, seen);
    try {
      Model.prototype.validate.call(proxy);
    } catch {
      // reported above
    }
    for (const field of unknownFields(proxy, seen)) problems.push(`${what}: unknown field ${field}`);
  }
}
for (const p of problems) console.log(p);
console.log(`${objects} objects, ${problems.length} problems`);
process.exit(problems.length ? 1 : 0);
