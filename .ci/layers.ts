/**
 * The layer check: reads the import graph of the package (`deno info --json`
 * of `mod.ts`, and of `ffi/test_aids.ts`, which only the tests import) and
 * fails on
 *
 * - an import cycle among the project's files (type-only imports count: a
 *   cycle of types still ties the files together for a reader);
 * - an import that climbs back up the rooms: a file may import files of its
 *   own room and of the rooms listed below it;
 * - a file of the graph that no room names, and a path the table names that
 *   does not exist.
 *
 * The order of the rooms is written in one place, docs/ARCHITECTURE.md's
 * rooms table (top to bottom), and read from there, so the table and this
 * check cannot disagree. A room names files (`src/route.ts`) and folders
 * (`src/walk/`, and `block_pool.ts` after it for `src/memory/block_pool.ts`);
 * a file goes to the room that names the longest path containing it.
 *
 * Run: `.ci/layers.sh`, which passes the files that `deno info --json`
 * wrote for `mod.ts` and `ffi/test_aids.ts` (the only file outside the
 * package's graph with imports of its own).
 *
 * @module
 */

// Known violations, each an import edge "from -> to" (paths from the
// repository root), in files that are being changed elsewhere as this check
// lands. The coordinator empties the list; an entry whose import is gone, or
// no longer climbs or closes a cycle, fails the check, so the list never
// outlives its reason.
const ALLOWED: Readonly<Record<string, string>> = {
  // None: every import points down the rooms.
};

const root = new URL("../", import.meta.url);
const TABLE = "docs/ARCHITECTURE.md";

interface Room {
  name: string;
  paths: string[];
}

/** The rooms of the table, top first, each with the paths it names. */
function readRooms(markdown: string): Room[] {
  const section = markdown.split(/^## /m).find((part) => part.startsWith("Rooms\n"));
  if (section === undefined) throw new Error(`${TABLE} has no "## Rooms" section`);
  const rows = section.split("\n").filter((line) => line.startsWith("|")).slice(2);
  return rows.map((row) => {
    const [name, files] = row.split("|").slice(1, 3).map((cell) => cell.trim());
    const paths: string[] = [];
    let folder = "";
    for (const [, token] of files.matchAll(/`([^`]+)`/g)) {
      // Backticked code that is not a path (`Tensor.from`) is prose.
      if (!/^[\w./-]+(\.ts|\/)$/.test(token)) continue;
      if (/^(src|ffi|native)\//.test(token) || !token.includes("/") && folder === "") {
        paths.push(token);
        if (token.endsWith("/")) folder = token;
      } else {
        paths.push(folder + token);
      }
    }
    return { name, paths };
  });
}

function exists(path: string): boolean {
  try {
    Deno.statSync(new URL(path, root));
    return true;
  } catch {
    return false;
  }
}

/** The project's files of one `deno info --json` graph, each with what it imports (type-only too). */
function importGraph(infoJson: string): Map<string, Set<string>> {
  const info = JSON.parse(Deno.readTextFileSync(infoJson));
  const local = (specifier: string | undefined) =>
    specifier?.startsWith(root.href) ? specifier.slice(root.href.length) : undefined;
  const graph = new Map<string, Set<string>>();
  for (const module of info.modules) {
    const from = local(module.specifier);
    if (from === undefined) continue;
    const to = new Set<string>();
    for (const dependency of module.dependencies ?? []) {
      for (const kind of ["code", "type"]) {
        const target = local(dependency[kind]?.specifier);
        if (target !== undefined) to.add(target);
      }
    }
    graph.set(from, to);
  }
  return graph;
}

/** The strongly connected components of more than one file, or of one that imports itself. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string) => {
    index.set(file, counter);
    low.set(file, counter++);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file)!, index.get(next)!));
      }
    }
    if (low.get(file) === index.get(file)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== file);
      if (component.length > 1 || graph.get(file)!.has(file)) found.push(component.sort());
    }
  };
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) visit(file);
  return found;
}

const problems: string[] = [];
const rooms = readRooms(Deno.readTextFileSync(new URL(TABLE, root)));
const roomOf = new Map<string, number>(); // path named by the table -> row
rooms.forEach((room, row) => {
  for (const path of room.paths) {
    if (roomOf.has(path)) problems.push(`${TABLE}: \`${path}\` is named by two rooms`);
    if (!exists(path)) {
      problems.push(`${TABLE}: room "${room.name}" names \`${path}\`, which does not exist`);
    }
    roomOf.set(path, row);
  }
});
/** The row of the room that names the longest path containing `file`. */
function rowOf(file: string): number | undefined {
  let best: string | undefined;
  for (const path of roomOf.keys()) {
    const contains = path.endsWith("/") ? file.startsWith(path) : file === path;
    if (contains && (best === undefined || path.length > best.length)) best = path;
  }
  return best === undefined ? undefined : roomOf.get(best);
}

const graph = new Map<string, Set<string>>();
for (const infoJson of Deno.args) {
  for (const [from, to] of importGraph(infoJson)) {
    graph.set(from, new Set([...graph.get(from) ?? [], ...to]));
  }
}
const allowedSeen = new Set<string>();
const checked = new Map<string, Set<string>>(); // the graph less the allowed edges
let edges = 0;
for (const [from, targets] of graph) {
  const fromRow = rowOf(from);
  if (fromRow === undefined) problems.push(`${from}: in no room of ${TABLE}'s table`);
  checked.set(from, new Set());
  for (const to of targets) {
    edges++;
    const edge = `${from} -> ${to}`;
    if (edge in ALLOWED) {
      allowedSeen.add(edge);
      continue;
    }
    checked.get(from)!.add(to);
    const toRow = rowOf(to);
    if (fromRow !== undefined && toRow !== undefined && toRow < fromRow) {
      problems.push(
        `${edge}: climbs from room "${rooms[fromRow].name}" up to room "${rooms[toRow].name}"`,
      );
    }
  }
}
// An allowed edge is still needed where it climbs or closes a cycle of the
// whole graph (its two ends in one strongly connected component).
const componentOf = new Map<string, number>();
cycles(graph).forEach((component, i) => component.forEach((file) => componentOf.set(file, i)));
for (const edge of allowedSeen) {
  const [from, to] = edge.split(" -> ");
  const fromRow = rowOf(from);
  const toRow = rowOf(to);
  const climbs = fromRow !== undefined && toRow !== undefined && toRow < fromRow;
  const closesCycle = componentOf.has(from) && componentOf.get(from) === componentOf.get(to);
  if (!climbs && !closesCycle) {
    problems.push(
      `${edge}: allowed in .ci/layers.ts, but it neither climbs nor closes a cycle: remove the entry`,
    );
  }
}
for (const component of cycles(checked)) {
  problems.push(`import cycle among ${component.join(", ")}`);
}
for (const edge of Object.keys(ALLOWED)) {
  if (!allowedSeen.has(edge)) {
    problems.push(
      `${edge}: allowed in .ci/layers.ts, but no such import remains: remove the entry`,
    );
  }
}

if (problems.length > 0) {
  for (const problem of problems) console.error(`layers: ${problem}`);
  Deno.exit(1);
}
console.log(
  `layers: ok (${graph.size} files, ${edges} imports, ${rooms.length} rooms, ` +
    `${Object.keys(ALLOWED).length} allowed exceptions)`,
);
