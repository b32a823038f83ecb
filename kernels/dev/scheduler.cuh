// Persistent tile scheduler: a grid of min(tiles, SMs * k) CTAs; CTA b takes tiles
// b, b + gridDim.x, b + 2 gridDim.x, ... of an M x N tile grid. With group width G > 1 the
// linear tile index is rastered in groups of G tile-rows along M: inside a group, consecutive
// tiles go down the G rows of one tile-column before moving to the next column, so CTAs of a
// wave share both A row-panels (G of them) and B column-panels in L2. G = 1 is row-major.
// Pure integer arithmetic, usable on the host (tests check it there).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define TALON_DEV_HD __host__ __device__ __forceinline__
#else
#define TALON_DEV_HD inline
#endif

namespace talon::dev {

struct TileCoord {
    int m, n; // tile indices (multiply by the tile size for element offsets)
};

// Tile `t` (0 <= t < tiles_m * tiles_n) of the grouped raster with group width g >= 1.
TALON_DEV_HD TileCoord tile_of(int t, int tiles_m, int tiles_n, int g) {
    const int per_group = g * tiles_n;
    const int group = t / per_group;
    const int first_m = group * g;
    const int rows = tiles_m - first_m < g ? tiles_m - first_m : g; // last group may be short
    const int r = t - group * per_group;
    return TileCoord{first_m + r % rows, r / rows};
}

// CTAs to launch: every SM busy `per_sm` times over, never more CTAs than tiles.
TALON_DEV_HD int persistent_grid(int tiles, int sms, int per_sm) {
    const int cap = sms * per_sm;
    return tiles < cap ? tiles : cap;
}

struct TileScheduler {
    int tiles_m, tiles_n, group, tile;

    // tile_m x tile_n tiles covering an m x n output.
    TALON_DEV_HD static TileScheduler make(int m, int n, int tile_m, int tile_n, int group,
                                           int first) {
        return TileScheduler{(m + tile_m - 1) / tile_m, (n + tile_n - 1) / tile_n,
                             group < 1 ? 1 : group, first};
    }
    TALON_DEV_HD int tiles() const { return tiles_m * tiles_n; }
    TALON_DEV_HD bool valid() const { return tile < tiles(); }
    TALON_DEV_HD TileCoord coord() const { return tile_of(tile, tiles_m, tiles_n, group); }
    TALON_DEV_HD void next(int stride) { tile += stride; }
};

} // namespace talon::dev
