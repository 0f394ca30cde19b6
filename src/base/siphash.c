/* SipHash-2-4-128 (see siphash.h): the state of four 64-bit words, two
 * rounds per 8-byte word of input, four to finish; the 128-bit variant
 * differs from the 64-bit one in v1's start and in the two finishing
 * constants.  Words are read little-endian whatever the host. */
#include "base/siphash.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static uint64_t le64(const uint8_t *p)
{
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--)
                v = (v << 8) | p[i];
        return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
        for (int i = 0; i < 8; i++, v >>= 8)
                p[i] = (uint8_t)v;
}

static void sip_round(uint64_t v[4])
{
        v[0] += v[1];
        v[1] = ROTL(v[1], 13);
        v[1] ^= v[0];
        v[0] = ROTL(v[0], 32);
        v[2] += v[3];
        v[3] = ROTL(v[3], 16);
        v[3] ^= v[2];
        v[0] += v[3];
        v[3] = ROTL(v[3], 21);
        v[3] ^= v[0];
        v[2] += v[1];
        v[1] = ROTL(v[1], 17);
        v[1] ^= v[2];
        v[2] = ROTL(v[2], 32);
}

static void sip_word(uint64_t v[4], uint64_t m)
{
        v[3] ^= m;
        sip_round(v);
        sip_round(v);
        v[0] ^= m;
}

static uint64_t sip_finish(uint64_t v[4], uint8_t mark)
{
        v[2] ^= mark;
        for (int i = 0; i < 4; i++)
                sip_round(v);
        return v[0] ^ v[1] ^ v[2] ^ v[3];
}

void siphash128(const uint8_t key[SIPHASH_KEY_SIZE], const void *data, size_t n,
                uint8_t out[SIPHASH_OUT_SIZE])
{
        const uint8_t *p = data;
        uint64_t k0 = le64(key), k1 = le64(key + 8);
        uint64_t v[4] = { k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f83ULL,
                          k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL };
        size_t whole = n - n % 8;
        for (size_t i = 0; i < whole; i += 8)
                sip_word(v, le64(p + i));
        uint64_t last = (uint64_t)n << 56;
        for (size_t i = 0; i < n % 8; i++)
                last |= (uint64_t)p[whole + i] << (8 * i);
        sip_word(v, last);
        put_le64(out, sip_finish(v, 0xee));
        v[1] ^= 0xdd;
        put_le64(out + 8, sip_finish(v, 0));
}
