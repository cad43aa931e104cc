// The npm build's compiler step, run under Node by npm/build.ts: the TypeScript compiler (from the
// build's tool directory) turns the sources into ES modules and declaration files, one .js and one
// .d.ts per source file, beside each other in the same tree.
//
//   node npm/_compile.mjs <tools dir> <out dir> <entry.ts>...
//
// Three rewrites make Deno's sources Node's modules:
// - relative ".ts" imports become ".js" (the compiler's rewriteRelativeImportExtensions);
// - "npm:name@version/sub" imports become "name/sub" (the package.json lists them);
// - `new URL("./x.ts", import.meta.url)` (the workers the library starts) names "./x.js".
// And a declaration file that names `Symbol.dispose`, `Symbol.asyncDispose`, `Disposable` or
// `AsyncDisposable` references `src/_disposable.d.ts` (DISPOSABLE below), so that a consumer whose
// lib lacks esnext.disposable (`--target es2022`, no @types/node) still compiles the package.
// Type errors are `deno task check`'s job; here only an unemittable program fails the build.
import { mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import process from "node:process";

const [toolsDir, outDir, ...entries] = process.argv.slice(2);
const require = createRequire(join(resolve(toolsDir), "package.json"));
const ts = require("typescript");
const ROOT = resolve(dirname(new URL(import.meta.url).pathname), "..");

/** `npm:name@1.2.3/sub` to `name/sub`; anything else unchanged. */
function bareNpm(specifier) {
  const m = /^npm:(@[^/@]+\/[^/@]+|[^/@]+)(?:@[^/]*)?(\/.*)?$/.exec(specifier);
  return m ? m[1] + (m[2] ?? "") : specifier;
}

const options = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  allowImportingTsExtensions: true,
  rewriteRelativeImportExtensions: true,
  declaration: true,
  strict: true,
  skipLibCheck: true,
  noLib: false,
  lib: ["lib.esnext.d.ts"],
  types: [],
  rootDir: ROOT,
  outDir: resolve(outDir),
  removeComments: false,
  newLine: ts.NewLineKind.LineFeed,
};

const host = ts.createCompilerHost(options);
const toolsProbe = join(resolve(toolsDir), "probe.ts");
host.resolveModuleNameLiterals = (literals, containingFile, _ref, opts) =>
  literals.map((lit) => {
    const name = bareNpm(lit.text);
    const relative = name.startsWith(".") || name.startsWith("/");
    // Bare names (npm packages, node: built-ins) resolve from the tool directory's node_modules.
    const from = relative ? containingFile : toolsProbe;
    return ts.resolveModuleName(name.startsWith("node:") ? name.slice(5) : name, from, opts, host);
  });

const rootNames = [...entries.map((e) => resolve(ROOT, e)), join(resolve(toolsDir), "deno.d.ts")];
const nodeTypes = join(resolve(toolsDir), "node_modules/@types/node/index.d.ts");
rootNames.push(nodeTypes);
const program = ts.createProgram({ rootNames, options, host });

/** Rewrites module specifiers and worker URLs in a source or declaration file. */
function rewriter(context) {
  const f = context.factory;
  const visit = (node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier) && node.moduleSpecifier.text.startsWith("npm:")
    ) {
      const spec = f.createStringLiteral(bareNpm(node.moduleSpecifier.text));
      return ts.isImportDeclaration(node)
        ? f.updateImportDeclaration(node, node.modifiers, node.importClause, spec, node.attributes)
        : f.updateExportDeclaration(node, node.modifiers, node.isTypeOnly, node.exportClause, spec, node.attributes);
    }
    if (
      ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal) &&
      node.argument.literal.text.startsWith("npm:")
    ) {
      const arg = f.createLiteralTypeNode(f.createStringLiteral(bareNpm(node.argument.literal.text)));
      return f.updateImportTypeNode(node, arg, node.attributes, node.qualifier, node.typeArguments, node.isTypeOf);
    }
    if (
      ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === "URL" &&
      node.arguments?.length === 2 && ts.isStringLiteral(node.arguments[0]) &&
      /^\.\.?\/.*\.ts$/.test(node.arguments[0].text) && /import\.meta\.url/.test(node.arguments[1].getText())
    ) {
      const js = f.createStringLiteral(node.arguments[0].text.replace(/\.ts$/, ".js"));
      return f.updateNewExpression(node, node.expression, node.typeArguments, [js, node.arguments[1]]);
    }
    return ts.visitEachChild(node, visit, context);
  };
  return (file) => ts.visitNode(file, visit);
}

/**
 * The explicit resource management types, as TypeScript's lib.esnext.disposable and @types/node
 * declare them (the same members, so that they merge with either): the package's classes name them
 * in their `[Symbol.asyncDispose]()` members and `implements` clauses.
 */
const DISPOSABLE = `// The explicit resource management types for a consumer whose lib lacks them (a target before
// esnext, no @types/node); the same declarations as TypeScript's lib.esnext.disposable and
// @types/node, so they merge with either.
interface SymbolConstructor {
  readonly dispose: unique symbol;
  readonly asyncDispose: unique symbol;
}

interface Disposable {
  [Symbol.dispose](): void;
}

interface AsyncDisposable {
  [Symbol.asyncDispose](): PromiseLike<void>;
}
`;
const disposableFile = join(resolve(outDir), "src", "_disposable.d.ts");
const NAMES_DISPOSABLE = /\bSymbol\.(?:async)?[dD]ispose\b|\b(?:Async)?Disposable\b/;

/** Writes an emitted file; a declaration file naming the disposable types references DISPOSABLE first. */
function writeFile(fileName, text) {
  if (fileName.endsWith(".d.ts") && NAMES_DISPOSABLE.test(text)) {
    let path = relative(dirname(fileName), disposableFile);
    if (!path.startsWith(".")) path = `./${path}`;
    text = `/// <reference path="${path}" />\n${text}`;
  }
  mkdirSync(dirname(fileName), { recursive: true });
  writeFileSync(fileName, text);
}

mkdirSync(dirname(disposableFile), { recursive: true });
writeFileSync(disposableFile, DISPOSABLE);
const emitted = program.emit(undefined, writeFile, undefined, false, {
  before: [rewriter],
  afterDeclarations: [rewriter],
});
const errors = emitted.diagnostics.filter((d) => d.category === ts.DiagnosticCategory.Error);
if (emitted.emitSkipped || errors.length > 0) {
  const text = ts.formatDiagnostics(errors, {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => ROOT,
    getNewLine: () => "\n",
  });
  console.error(`The npm build could not emit:\n${text}`);
  process.exit(1);
}
