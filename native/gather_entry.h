// One entry of a gather table, shared by the gather kernel and the host
// code that walks the same table: where a tensor lives and where it goes in
// the packed buffer. Doubles, because JS writes them into a Float64Array
// for free (addresses are below 2^53, so doubles hold them exactly).

#ifndef MTC_GATHER_ENTRY_H
#define MTC_GATHER_ENTRY_H

struct mtc_gather_entry {
  double src;
  double dst_offset;
  double bytes;
};

#endif
