import assert from "node:assert/strict";
import {
  borrowList,
  firstPositions,
  IndexList,
  NumberList,
  returnList,
} from "../src/number_list.ts";

Deno.test("a NumberList keeps every pushed value, in order, past its initial capacity", () => {
  const list = new NumberList();
  const count = list.data.length * 2 + 3;
  for (let i = 0; i < count; i++) list.push(i * 0.5);
  assert.equal(list.length, count);
  assert.deepEqual(Array.from(list.view()), Array.from({ length: count }, (_, i) => i * 0.5));
});

Deno.test("a NumberList's view shows only its first `length` entries and shares its storage", () => {
  const list = new NumberList();
  list.push(7);
  list.push(9);
  const view = list.view();
  assert.deepEqual(Array.from(view), [7, 9]);
  assert.equal(view.buffer, list.data.buffer);
});

Deno.test("a borrowed list starts empty, even one returned with entries", () => {
  const list = borrowList();
  list.push(1);
  list.push(2);
  returnList(list);
  const again = borrowList();
  assert.equal(again.length, 0);
  assert.deepEqual(Array.from(again.view()), []);
  returnList(again);
});

Deno.test("a returned list is handed out again (no allocation per copy)", () => {
  const list = borrowList();
  returnList(list);
  const again = borrowList();
  assert.equal(again, list);
  returnList(again);
});

Deno.test("an IndexList of 0, 1, 2, ... stays implicit and reads back as those positions", () => {
  const list = new IndexList();
  for (let i = 0; i < 5; i++) list.push(i);
  assert.equal(list.length, 5);
  assert.deepEqual(Array.from(list.view()), [0, 1, 2, 3, 4]);
  list.release();
});

Deno.test("an IndexList writes out the implicit prefix at the first other index", () => {
  const list = new IndexList();
  list.push(0);
  list.push(1);
  list.push(2);
  list.push(9);
  list.push(3);
  assert.equal(list.length, 5);
  assert.deepEqual(Array.from(list.view()), [0, 1, 2, 9, 3]);
  list.release();
});

Deno.test("an IndexList whose first index is not 0 lists it", () => {
  const list = new IndexList();
  list.push(4);
  list.push(5);
  assert.deepEqual(Array.from(list.view()), [4, 5]);
  assert.equal(list.length, 2);
  list.release();
});

Deno.test("a released IndexList is empty and implicit again", () => {
  const list = new IndexList();
  list.push(3);
  list.release();
  assert.equal(list.length, 0);
  assert.deepEqual(Array.from(list.view()), []);
  list.push(0);
  list.push(1);
  assert.deepEqual(Array.from(list.view()), [0, 1]);
  list.release();
});

Deno.test("firstPositions(n) is 0..n-1, and an earlier view is unchanged after it grows", () => {
  const small = firstPositions(3);
  assert.deepEqual(Array.from(small), [0, 1, 2]);
  const large = firstPositions(100_000);
  assert.equal(large.length, 100_000);
  for (let k = 0; k < large.length; k++) {
    if (large[k] !== k) assert.fail(`position ${k} is ${large[k]}`);
  }
  assert.deepEqual(Array.from(small), [0, 1, 2]);
  assert.deepEqual(Array.from(firstPositions(0)), []);
});
