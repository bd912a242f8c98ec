import assert from "node:assert/strict";
import { inFlight, otherWork, reapFinished } from "../src/copies_in_flight.ts";

/** Copies that settle (leave the set) when asked once `done`, logging each question. */
function copies(done: boolean[], asked: number[]) {
  const made = done.map((_, i) => {
    const copy = {
      ready(): boolean {
        asked.push(i);
        if (done[i]) inFlight.delete(copy);
        return done[i];
      },
    };
    return copy;
  });
  for (const copy of made) inFlight.add(copy);
  return made;
}

function forget(made: object[]): void {
  for (const copy of made) inFlight.delete(copy as never);
}

Deno.test("reapFinished() settles copies oldest first and stops at the first one still running", () => {
  const asked: number[] = [];
  const made = copies([true, true, false, true], asked);
  try {
    reapFinished();
    // The fourth finished too, but copies on one stream finish in order:
    // asking past the first running one would cost a query per copy.
    assert.deepEqual(asked, [0, 1, 2]);
    assert.deepEqual([...inFlight].filter((c) => made.includes(c as never)), [made[2], made[3]]);
  } finally {
    forget(made);
  }
});

Deno.test("reapFinished(true) asks every copy in flight, running or not", () => {
  const asked: number[] = [];
  const made = copies([false, true, false, true], asked);
  try {
    reapFinished(true);
    assert.deepEqual(asked, [0, 1, 2, 3]);
    assert.deepEqual([...inFlight].filter((c) => made.includes(c as never)), [made[0], made[2]]);
  } finally {
    forget(made);
  }
});

Deno.test("reapFinished() settles the other GPU work first, passing on whether to ask every one", () => {
  const calls: string[] = [];
  const work = (everyOne: boolean) => calls.push(`work ${everyOne}`);
  otherWork.push(work);
  const made = copies([false], []);
  const copy = made[0];
  const ready = copy.ready;
  copy.ready = () => (calls.push("copy"), ready());
  try {
    reapFinished();
    reapFinished(true);
    assert.deepEqual(calls, ["work false", "copy", "work true", "copy"]);
  } finally {
    otherWork.splice(otherWork.indexOf(work), 1);
    forget(made);
  }
});

Deno.test("reapFinished() with no copy in flight asks nothing and returns", () => {
  const before = [...inFlight];
  for (const copy of before) inFlight.delete(copy);
  try {
    reapFinished();
    reapFinished(true);
    assert.equal(inFlight.size, 0);
  } finally {
    for (const copy of before) inFlight.add(copy);
  }
});
