/**
 * Swaps a file between two contents, by rename, as fast as it can, until
 * killed: what a process that can write the shim cache could do while
 * another one checks the cached shim and loads it.
 *
 * `deno run --allow-read --allow-write _swap_loop.ts <target> <planted> <genuine>`
 *
 * @module
 */

const [target, ...sources] = Deno.args;
const contents = sources.map((path) => Deno.readFileSync(path));
const temporary = `${target}.swap`;
console.log("swapping");
for (let i = 0;; i++) {
  Deno.writeFileSync(temporary, contents[i % 2], { mode: 0o644 });
  Deno.chmodSync(temporary, 0o644);
  Deno.renameSync(temporary, target);
}
