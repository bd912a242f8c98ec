/**
 * The reference package's example batch: per-sample meta-data of a
 * multi-camera 3D detector. Each sample has 6 cameras with 5 tensors each
 * (2D boxes, class ids, active flags, depths, projection matrix) and 3
 * ground-truth tensors: 33 tensors a sample, 528 for 16 samples.
 *
 * @module
 */

import { Tensor } from "../mod.ts";

/** One camera's annotations. */
export interface CameraGroundTruth {
  /** (N, 4) float32 2D boxes. */
  bounding_boxes: Tensor;
  /** (N,) int64 class ids. */
  class_ids: Tensor;
  /** (N,) bool active flags. */
  active: Tensor;
  /** (N,) float32 depths. */
  depths: Tensor;
  /** (3, 4) float32 camera-to-image projection. */
  proj_mat: Tensor;
}

/** One sample's meta-data. */
export interface SampleMetaData {
  /** The 6 cameras. */
  cams_gt: CameraGroundTruth[];
  /** 3D ground truth of the sample. */
  gt_data: {
    /** (N, 7) float32 3D boxes. */
    bounding_boxes_3d: Tensor;
    /** (N,) int64 class ids. */
    class_ids: Tensor;
    /** (N,) bool active flags. */
    active: Tensor;
  };
}

/** A small deterministic PRNG (mulberry32), so every run builds the same batch. */
export function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Where the batch's arrays are allocated: ordinary memory, or a host arena. */
export interface ArrayMaker {
  float32(length: number): Float32Array;
  int64(length: number): BigInt64Array;
  uint8(length: number): Uint8Array;
}

const ORDINARY: ArrayMaker = {
  float32: (length) => new Float32Array(length),
  int64: (length) => new BigInt64Array(length),
  uint8: (length) => new Uint8Array(length),
};

let make: ArrayMaker = ORDINARY;

function floats(rand: () => number, count: number): Float32Array {
  const data = make.float32(count);
  for (let i = 0; i < count; i++) data[i] = rand() * 100;
  return data;
}

function objects(rand: () => number, n: number, width: number): {
  boxes: Tensor;
  ids: Tensor;
  active: Tensor;
} {
  const ids = make.int64(n);
  const active = make.uint8(n);
  for (let i = 0; i < n; i++) {
    ids[i] = BigInt(Math.floor(rand() * 10));
    active[i] = rand() < 0.8 ? 1 : 0;
  }
  return {
    boxes: Tensor.from(floats(rand, n * width), [n, width]),
    ids: Tensor.from(ids),
    active: Tensor.from(active, [n], "bool"),
  };
}

/**
 * Builds the batch: `samples` samples (16 in the reference), 6 cameras each
 * with 0–60 visible objects, 50–150 ground-truth objects a sample. Its
 * arrays come from `arrays` (a `hostArena` builds it in pinned memory).
 *
 * @example
 * ```ts
 * import { createBatchMetaData } from "./reference_batch.ts";
 * import assert from "node:assert/strict";
 * const batch = createBatchMetaData(16);
 * assert.equal(batch.length, 16);
 * assert.equal(batch[0].cams_gt.length, 6);
 * ```
 */
export function createBatchMetaData(
  samples = 16,
  seed = 1,
  arrays: ArrayMaker = ORDINARY,
): SampleMetaData[] {
  make = arrays;
  try {
    return build(samples, seed);
  } finally {
    make = ORDINARY;
  }
}

function build(samples: number, seed: number): SampleMetaData[] {
  const rand = random(seed);
  const batch: SampleMetaData[] = [];
  for (let s = 0; s < samples; s++) {
    const cams_gt: CameraGroundTruth[] = [];
    for (let c = 0; c < 6; c++) {
      const n = Math.floor(rand() * 61);
      const { boxes, ids, active } = objects(rand, n, 4);
      cams_gt.push({
        bounding_boxes: boxes,
        class_ids: ids,
        active,
        depths: Tensor.from(floats(rand, n)),
        proj_mat: Tensor.from(floats(rand, 12), [3, 4]),
      });
    }
    const n = 50 + Math.floor(rand() * 101);
    const { boxes, ids, active } = objects(rand, n, 7);
    batch.push({
      cams_gt,
      gt_data: { bounding_boxes_3d: boxes, class_ids: ids, active },
    });
  }
  return batch;
}
