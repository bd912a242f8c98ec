import assert from "node:assert/strict";
import { ABI_VERSION, symbols, testAidSymbols } from "../../ffi/symbols.ts";

// The product's export names are compared with the binary by .ci/boundary.sh;
// here, each declaration is compared with the C definition it calls: a
// parameter missing, added or of another width would pass every name check
// and corrupt the call at run time.

const native = new URL("../../native/", import.meta.url);

/** C type → Deno FFI type, as symbols.ts writes them (addresses are doubles). */
function ffiType(cType: string, result: boolean): string {
  const type = cType.replace(/\b(const|restrict)\b/g, "").replace(/\s+/g, " ").trim();
  if (type.includes("*") || /\[\d*\]$/.test(type)) return result ? "pointer" : "buffer|pointer";
  if (type === "void") return "void";
  if (type === "int32_t") return "i32";
  if (type === "double" || type === "addr_t") return "f64";
  throw new Error(`a C type this test does not map: "${cType}"`);
}

interface CFunction {
  result: string;
  parameters: string[];
}

/** The `MTC_EXPORT` definitions of `files`, by name. */
async function exportedFunctions(files: string[]): Promise<Map<string, CFunction>> {
  const found = new Map<string, CFunction>();
  for (const file of files) {
    const source = await Deno.readTextFile(new URL(file, native));
    const definition = /MTC_EXPORT\s+([\w\s*]+?)\s*\b(mtc_\w+)\s*\(([^)]*)\)\s*\{/g;
    for (const [, result, name, list] of source.matchAll(definition)) {
      const parameters = list.trim() === "void" || list.trim() === ""
        ? []
        : list.split(",").map((parameter) =>
          // Drop the parameter's name, keep its type (and a trailing [N]).
          parameter.trim().replace(/\b\w+(\s*\[\d*\])?$/, (_, array) => array ? "*" : "")
        );
      found.set(name, {
        result: ffiType(result, true),
        parameters: parameters.map((p) => ffiType(p, false)),
      });
    }
  }
  return found;
}

function compare(
  table: Record<string, { name?: string; parameters: readonly string[]; result: string }>,
  functions: Map<string, CFunction>,
): void {
  for (const [key, declared] of Object.entries(table)) {
    const name = declared.name ?? key;
    const c = functions.get(name);
    assert.ok(c, `${name} is declared in ffi/symbols.ts but not defined with MTC_EXPORT`);
    assert.equal(declared.result, c.result, `${name}'s result`);
    assert.equal(
      declared.parameters.length,
      c.parameters.length,
      `${name} takes ${c.parameters.length} parameters in C, ${declared.parameters.length} in symbols.ts`,
    );
    declared.parameters.forEach((type, i) => {
      assert.ok(
        c.parameters[i].split("|").includes(type),
        `${name}'s parameter ${i}: C ${c.parameters[i]}, symbols.ts ${type}`,
      );
    });
  }
}

// The product's C files, as native/build.sh compiles them (a file added
// there is checked here with no second list to forget).
const buildScript = await Deno.readTextFile(new URL("build.sh", native));
const productSources = buildScript.match(/^c_files=\(([^)]*)\)/m)![1].trim().split(/\s+/);

Deno.test("every product symbol is declared with the parameters and result of its C definition", async () => {
  const functions = await exportedFunctions(productSources);
  const declared = Object.entries(symbols).map(([key, value]) =>
    "name" in value ? value.name : key
  );
  assert.deepEqual([...functions.keys()].sort(), [...new Set(declared)].sort());
  compare(symbols, functions);
});

Deno.test("every test-aid symbol is declared with the parameters and result of its C definition (native/testaid.c)", async () => {
  compare(testAidSymbols, await exportedFunctions(["testaid.c"]));
});

Deno.test("no test-aid symbol is a product symbol: the product never exports them", () => {
  for (const name of Object.keys(testAidSymbols)) assert.ok(!(name in symbols), name);
});

Deno.test("a nonblocking declaration calls the blocking C function of its name, under a name of its own", () => {
  for (const [key, declared] of Object.entries(symbols)) {
    if (!("nonblocking" in declared)) continue;
    assert.equal(key, `${declared.name}_nonblocking`);
  }
});

Deno.test("ABI_VERSION is the version native/mtc.c builds in", async () => {
  const source = await Deno.readTextFile(new URL("mtc.c", native));
  assert.equal(ABI_VERSION, Number(source.match(/#define MTC_ABI_VERSION (\d+)/)![1]));
});
