#!/usr/bin/perl

# R-BUDGET-3: the openai npm SDK against a client key's limits
# (t/sdk/budget.cjs, installed by `make sdk-deps` into build/npm): it
# reads the x-ratelimit-* headers of an answer (withResponse()), and its
# own back-off honours the gateway's 429 Retry-After: a request that
# meets the concurrency cap is retried no sooner than Retry-After says,
# and then answered.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $npm = $ENV{OMNI_NPM_DIR} || "$OmniTest::ROOT/build/npm";

OmniTest::need(system('node --version >/dev/null 2>&1') == 0,
               'node is not installed (make test-deps)');

OmniTest::need(-d "$npm/node_modules/openai",
               "the openai SDK is not installed in $npm (make sdk-deps)");

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $KEY = 'sk-client-sdk-0123456789abcdef';
$t->write_file('client', "$KEY\n");
$t->write_file('key-a', "sk-up-a\n");
$t->write_file('key-s', "sk-up-s~delay=1600\n");

$t->config(<<'EOF2');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha;
    omniroute_provider slow url=http://127.0.0.1:%%PORT_mock_p%%/slow;
    omniroute_connection a provider=alpha key_file=%%TESTDIR%%/key-a;
    omniroute_connection s provider=slow key_file=%%TESTDIR%%/key-s;
    omniroute_model fast alpha/fast;
    omniroute_model slow slow/slow;

    omniroute_client_key sdk file=%%TESTDIR%%/client;
    omniroute_client_key_limit sdk requests_per_minute=1000 concurrent=1
                               output_tokens_per_minute=100k;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }
    }
EOF2

$t->run($t->port('gw'));
my $base = 'http://127.0.0.1:' . $t->port('gw') . '/v1';

local $ENV{OMNI_NPM_DIR} = $npm;
my $out = `node $FindBin::Bin/sdk/budget.cjs $base $KEY fast slow 2>&1`;
my $r = eval { decode_json((split /\n/, $out)[-1]) } // { error => $out };
diag("sdk output: $out") if !$r->{ok} || $ENV{OMNI_SDK_DEBUG};

ok($r->{ok}, 'the SDK\'s requests all ended with an answer')
    or diag(explain $r);
is($r->{text}, 'hello from p', 'the first answer');
is($r->{headers}{'x-ratelimit-limit-requests'}, 1000,
   'the SDK reads x-ratelimit-limit-requests');
like($r->{headers}{'x-ratelimit-remaining-requests'} // '', qr/^99\d$/,
     'x-ratelimit-remaining-requests');
is($r->{headers}{'x-ratelimit-limit-tokens'}, 100000,
   'x-ratelimit-limit-tokens');
is($r->{headers}{'x-ratelimit-remaining-tokens'},
   100000 - 50, 'x-ratelimit-remaining-tokens: max_tokens reserved');
like($r->{headers}{'x-ratelimit-reset-tokens'} // '', qr/^\d+(ms|s)$|m\d+s$/,
     'x-ratelimit-reset-tokens: a duration');

# the fetches of the second request for "fast" (the first is the one read
# with withResponse(), the slow one holds the slot)
my @f = grep { ($_->{model} // '') eq 'fast' } @{$r->{fetches} // []};
shift @f;
my @refused = grep { $_->{status} == 429 } @f;
cmp_ok(scalar @refused, '>=', 1, 'the cap refused the SDK at least once');
is($refused[0] && $refused[0]{retryAfter}, 1, 'with Retry-After: 1');

# the fetch after the first 429 came no sooner than Retry-After
my ($i) = grep { $f[$_]{status} == 429 } 0 .. $#f;
ok(defined $i && $i < $#f, 'the SDK retried after the 429');
cmp_ok($f[$i + 1]{at} - $f[$i]{at}, '>=', 900,
       'no sooner than Retry-After (1 s)') if defined $i && $i < $#f;
is($f[-1]{status}, 200, 'and was answered');
is($r->{retriedText}, 'hello from p', 'the retried request\'s answer');

$t->done;
done_testing;
