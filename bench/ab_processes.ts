/**
 * `bench/ab_same_process.ts` in many processes, half in each load order,
 * with the median over processes of each case's ratio (new ÷ old).
 *
 * One A/B process can read a case 0.8× or 1.6× for the same two versions
 * (bench/RESULTS.md, tenth session: the VM's 64-sample case swung from
 * 0.79 to 1.62 over eight processes while single-library processes of it
 * held within ±8 %), so one process says little; the median of several,
 * in both load orders, does.
 *
 * Run, from the new checkout:
 * `deno run --allow-run --allow-env --allow-read bench/ab_processes.ts <old checkout> [processes=8] [iterations=2000]`
 * (`MTC_AB_ONLY=<text>` as for ab_same_process.ts; each process runs every
 * selected case). Prints, per case, the ratios sorted and their median.
 *
 * @module
 */

if (Deno.args.length === 0) {
  console.log("Needs the old checkout's directory as the first argument.");
  Deno.exit(0);
}
const [oldRoot, processesArg = "8", iterations = "2000"] = Deno.args;
const processes = Math.max(2, Number(processesArg));
const script = new URL("./ab_same_process.ts", import.meta.url).pathname;

/** Each case's ratio of medians (copy to `get()`), from one process's output. */
function ratiosOf(output: string): Map<string, number> {
  const ratios = new Map<string, number>();
  for (const line of output.split("\n")) {
    const match = line.match(/^(\S.*?)\s+old .*new\/old ([0-9.]+)/);
    if (match) ratios.set(match[1].trim(), Number(match[2]));
  }
  return ratios;
}

const byCase = new Map<string, number[]>();
for (let p = 0; p < processes; p++) {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-ffi", "--allow-read", "--allow-env", script, oldRoot, iterations],
    env: { MTC_AB_NEW_FIRST: p % 2 === 1 ? "1" : "0" },
  }).output();
  const output = new TextDecoder().decode(stdout);
  if (code !== 0) {
    console.error(new TextDecoder().decode(stderr));
    Deno.exit(code);
  }
  if (output.startsWith("Needs")) {
    console.log(output.trim());
    Deno.exit(0);
  }
  for (const [name, ratio] of ratiosOf(output)) {
    if (!byCase.has(name)) byCase.set(name, []);
    byCase.get(name)!.push(ratio);
  }
}
for (const [name, ratios] of byCase) {
  const sorted = [...ratios].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  console.log(
    `${name.padEnd(22)} new/old median ${median.toFixed(3)} over ${sorted.length} processes: ${
      sorted.map((r) => r.toFixed(2)).join(" ")
    }`,
  );
}
