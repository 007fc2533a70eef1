#!/usr/bin/perl

# R-CONF-1..5: nginx -t accepts a good configuration and rejects bad values
# with a message naming the directive or object, the value and the reason.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest;

my $t = OmniTest->new;

$t->write_file('key', "sk-1\n");
$t->write_file('empty-key', "\n");

my $server = <<'EOF';
    server {
        listen 127.0.0.1:%%PORT_gw%%;
        location /v1/ { omniroute_pass; }
        location /_omniroute { internal; include %%PARAMS%%; }
    }
EOF

my $good = <<'EOF';
    omniroute_zone zone=omniroute:1m;
    omniroute_provider p url=https://api.example.com/v1 kind=oauth
                       auth=header:api-key header=anthropic-version:1;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key
                         priority=2 weight=3;
    omniroute_model alias p/up;
    omniroute_combo combo strategy=priority alias p/other;
EOF

sub check {
    my ($http, $want, $name) = @_;
    $t->config($http . $server);
    my ($rc, $out) = $t->test_config;
    if (!defined $want) {
        is($rc, 0, $name) or diag($out);
        return;
    }
    isnt($rc, 0, "$name: nginx -t fails");
    like($out, $want, "$name: the message says why") or diag($out);
}

check($good, undef, 'R-CONF-1 a good configuration passes nginx -t');

# directive order does not matter: connections and combos before providers
check(<<'EOF', undef, 'directives may come in any order');
    omniroute_combo combo alias p/other;
    omniroute_model alias p/up;
    omniroute_connection c1 provider=p key_file=%%TESTDIR%%/key;
    omniroute_provider p url=http://127.0.0.1:1/v1;
EOF

my @bad = (
    [ 'omniroute_zone omniroute:1m;',
      qr/invalid parameter "omniroute:1m", expected "zone=name:size"/,
      'zone without zone=' ],
    [ 'omniroute_zone zone=omniroute:abc;',
      qr/invalid zone size "zone=omniroute:abc"/, 'zone with a bad size' ],
    [ 'omniroute_zone zone=omniroute:1k;',
      qr/zone "zone=omniroute:1k" is too small/, 'zone too small' ],
    [ "omniroute_zone zone=a:1m;\nomniroute_zone zone=b:1m;",
      qr/"omniroute_zone" directive is duplicate/, 'second zone' ],
    [ 'omniroute_provider p kind=apikey;',
      qr/provider "p" has no "url=" parameter/, 'provider without url' ],
    [ 'omniroute_provider p url=ftp://x/v1;',
      qr/invalid url "ftp:\/\/x\/v1" of provider "p": expected http/,
      'provider url with a bad scheme' ],
    [ 'omniroute_provider p url=http://x:99999/v1;',
      qr/invalid url "http:\/\/x:99999\/v1" of provider "p": invalid port/,
      'provider url with a bad port' ],
    [ 'omniroute_provider p url=http://x/v1?a=b;',
      qr/query strings and fragments are not allowed/,
      'provider url with a query' ],
    [ 'omniroute_provider p url=http://x/v1 kind=cloud;',
      qr/invalid kind "cloud" of provider "p": expected oauth, apikey or local/,
      'provider kind' ],
    [ 'omniroute_provider p url=http://x/v1 auth=basic;',
      qr/invalid auth "basic" of provider "p": expected bearer, x-api-key, header:NAME or none/,
      'provider auth style' ],
    [ 'omniroute_provider p url=http://x/v1 auth=header:bad:name;',
      qr/invalid auth header name "bad:name" of provider "p"/,
      'auth header name' ],
    [ 'omniroute_provider p url=http://x/v1 header=novalue;',
      qr/invalid header "novalue" of provider "p": expected "header=Name:value"/,
      'extra header without a colon' ],
    [ 'omniroute_provider p url=http://x/v1 colour=red;',
      qr/invalid parameter "colour=red" of provider "p"/,
      'unknown provider parameter' ],
    [ "omniroute_provider p url=http://x/v1;\nomniroute_provider p url=http://y/v1;",
      qr/duplicate provider "p"/, 'duplicate provider' ],
    [ 'omniroute_provider "a b" url=http://x/v1;',
      qr/invalid provider name "a b"/, 'provider name with a space' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=q key_file=%%TESTDIR%%/key;',
      qr/connection "c" names unknown provider "q"/,
      'connection of an unknown provider' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c key_file=%%TESTDIR%%/key;',
      qr/connection "c" has no "provider=" parameter/,
      'connection without provider' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p key_env=OMNI_SURELY_UNSET_VAR;',
      qr/connection "c": environment variable "OMNI_SURELY_UNSET_VAR" is not set or empty/,
      'credential from an unset environment variable' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p key_file=%%TESTDIR%%/nope;',
      qr/connection "c": cannot use key file/, 'missing key file' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p key_file=%%TESTDIR%%/empty-key;',
      qr/key file ".*empty-key" is empty/, 'empty key file' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p;',
      qr/connection "c" needs "key_env=" or "key_file=": provider "p" sends a credential/,
      'connection without a credential' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p key_file=%%TESTDIR%%/key priority=-1;',
      qr/invalid priority "-1" of connection "c": expected 0..1000000/,
      'negative priority' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_connection c provider=p key_file=%%TESTDIR%%/key weight=0;',
      qr/invalid weight "0" of connection "c": expected 1..1000/,
      'zero weight' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . "omniroute_connection c provider=p key_file=%%TESTDIR%%/key;\n"
      . 'omniroute_connection c provider=p key_file=%%TESTDIR%%/key;',
      qr/duplicate connection "c"/, 'duplicate connection' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_model m q/up;',
      qr/target "q\/up" of "m" is neither "provider\/model" with a declared provider nor a model alias/,
      'model of an unknown provider' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_combo c strategy=fastest p/a;',
      qr/unknown strategy "fastest" of combo "c": expected priority, weighted/, 'unknown strategy' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_combo c strategy=priority;',
      qr/combo "c" has no targets/, 'combo without targets' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . "omniroute_model m p/a;\nomniroute_model m p/b;",
      qr/duplicate model or combo "m"/, 'duplicate model' ],
    [ "omniroute_provider p url=http://x/v1;\n"
      . 'omniroute_model m p/;',
      qr/target "p\/" of "m" has an empty model name/, 'empty upstream model' ],
    [ 'omniroute_max_attempts 0;',
      qr/invalid value "0" of "omniroute_max_attempts": must be between 1 and 100/,
      'max attempts out of range' ],
    [ 'omniroute_error_body_buffer_size 100;',
      qr/"omniroute_error_body_buffer_size" must be at least 1k/,
      'error body buffer too small' ],

    # resilience parameters: the ranges of the admin API
    [ 'omniroute_provider p url=http://x/v1 breaker_failures=0;',
      qr/invalid value "0" of "breaker_failures" of provider "p": must be between 1 and 100000/,
      'breaker_failures 0' ],
    [ 'omniroute_provider p url=http://x/v1 breaker_max_multiplier=2000;',
      qr/invalid value "2000" of "breaker_max_multiplier" of provider "p": must be between 1 and 1024/,
      'breaker_max_multiplier above 1024' ],
    [ 'omniroute_provider p url=http://x/v1 breaker_reset=31d;',
      qr/invalid value "31d" of "breaker_reset" of provider "p": must be between 1ms and 30d/,
      'breaker_reset above 30 days' ],
    [ 'omniroute_provider p url=http://x/v1 breaker_reset=soon;',
      qr/invalid value "soon" of "breaker_reset" of provider "p": expected a time/,
      'breaker_reset not a time' ],
    [ 'omniroute_provider p url=http://x/v1 retry_delay=500ms;',
      qr/invalid value "500ms" of "retry_delay" of provider "p": must be between 1s and 6h/,
      'retry_delay under 1 s' ],
    [ 'omniroute_provider p url=http://x/v1 breaker_window_gate=yes;',
      qr/invalid value "yes" of "breaker_window_gate" of provider "p": expected on or off/,
      'breaker_window_gate not on or off' ],
    [ 'omniroute_provider p url=http://x/v1 lockout=1;',
      qr/invalid value "1" of "lockout" of provider "p": expected on or off/,
      'lockout not on or off' ],
    [ 'omniroute_model_lockout on steps=31;',
      qr/invalid value "31" of "steps" of "omniroute_model_lockout": must be between 0 and 30/,
      'lockout steps above 30' ],
    [ 'omniroute_model_lockout on max=40d;',
      qr/invalid value "40d" of "max" of "omniroute_model_lockout": must be between 1ms and 30d/,
      'lockout max above 30 days' ],
    [ 'omniroute_model_lockout on codes=429,99;',
      qr/invalid value "429,99" of "codes" of "omniroute_model_lockout": expected HTTP statuses \(100\.\.599\)/,
      'lockout code 99' ],
    [ 'omniroute_model_lockout on codes=429,429;',
      qr/"429,429" of "codes" of "omniroute_model_lockout": 429 is listed twice/,
      'lockout code twice' ],
    [ 'omniroute_model_lockout maybe;',
      qr/invalid value "maybe" of "omniroute_model_lockout": expected on or off/,
      'lockout neither on nor off' ],

    # the rules between settings (the engine used to lower a degrade
    # threshold above the open threshold without a word)
    [ 'omniroute_provider p url=http://x/v1 breaker_degrade=10 breaker_failures=8;',
      qr/invalid resilience settings of provider "p": breaker_degrade=10 conflicts with breaker_failures=8: the degrade threshold must not exceed the open threshold \(it would be 8\) in \S+nginx\.conf:\d+/,
      'breaker_degrade above breaker_failures' ],
    [ 'omniroute_provider p url=http://x/v1 breaker_failures=3 breaker_degrade=4;',
      qr/breaker_degrade=4 conflicts with breaker_failures=3: the degrade threshold must not exceed the open threshold/,
      'in either order' ],
    [ 'omniroute_provider p url=http://x/v1 breaker_degrade=9 kind=oauth;',
      qr/breaker_degrade=9 conflicts with breaker_failures=8 \(the oauth default\)/,
      'breaker_degrade above the kind\'s open threshold' ],
    [ 'omniroute_provider p url=http://x/v1 cooldown_base=5s cooldown_max=4s;',
      qr/cooldown_base=5s conflicts with cooldown_max=4s: cooldown max must be at least the base/,
      'cooldown_base above cooldown_max' ],
    [ 'omniroute_provider p url=http://x/v1 cooldown_base=1h;',
      qr/cooldown_base=1h conflicts with cooldown_max=30m \(the apikey default\): cooldown max must be at least the base/,
      'cooldown_base above the default cooldown_max' ],
    [ 'omniroute_model_lockout on base=1h;',
      qr/invalid "omniroute_model_lockout": base=1h conflicts with max=30m \(the default\): lockout max_cooldown must be at least base_cooldown/,
      'lockout base above the default max' ],
    [ 'omniroute_model_lockout on base=10m max=5m;',
      qr/base=10m conflicts with max=5m: lockout max_cooldown must be at least base_cooldown/,
      'lockout base above max' ],
);

for my $case (@bad) {
    my ($http, $re, $name) = @$case;
    check("    $http\n", $re, "R-CONF-5 $name");
}

# the rules between settings are reported at the directive's line (its
# last line, as nginx does), naming the parameter, its value and the reason
$t->config("    omniroute_zone zone=omniroute:1m;\n"
           . "    omniroute_provider p url=http://x/v1 kind=oauth\n"
           . "                       breaker_degrade=10;\n"
           . "    omniroute_provider q url=http://y/v1;\n" . $server);
{
    my ($rc, $out) = $t->test_config;
    my @lines = split /\n/, $t->read_file('nginx.conf');
    my ($line) = grep { $lines[$_ - 1] =~ /breaker_degrade=10;/ } 1 .. @lines;

    isnt($rc, 0, 'R-CONF-5 breaker_degrade above the open threshold fails');
    like($out, qr/\[emerg\] invalid resilience settings of provider "p": breaker_degrade=10 conflicts with breaker_failures=8 \(the oauth default\): the degrade threshold must not exceed the open threshold \(it would be 8\) in \S+\/nginx\.conf:$line$/m,
         "R-CONF-5 naming parameter, value and reason at line $line")
        or diag($out);
}

check(<<'EOF', undef, 'breaker_degrade equal to breaker_failures passes');
    omniroute_provider p url=http://x/v1 breaker_degrade=8 breaker_failures=8;
    omniroute_provider q url=http://x/v1 breaker_degrade=8 kind=oauth;
    omniroute_model_lockout on base=5m max=5m steps=0 codes=429,503;
EOF

{
    # nginx.conf against the environment: nginx.conf is refused
    local $ENV{OMNIROUTE_CIRCUIT_BREAKER_API_KEY_DEGRADATION_THRESHOLD} = '10';

    check("    omniroute_provider p url=http://x/v1 breaker_failures=5;\n",
          qr/breaker_failures=5 conflicts with OMNIROUTE_CIRCUIT_BREAKER_API_KEY_DEGRADATION_THRESHOLD=10: the degrade threshold must not exceed the open threshold/,
          'R-CONF-5 breaker_failures below the environment\'s degrade '
          . 'threshold');

    # between environment variables only: a warning, as for a variable out
    # of range
    local $ENV{OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD} = '5';

    check("    omniroute_provider p url=http://x/v1;\n", undef,
          'a contradiction of the environment alone passes');
    like((test_out())[1], qr/\[warn\] .*provider "p": OMNIROUTE_CIRCUIT_BREAKER_API_KEY_DEGRADATION_THRESHOLD=10 conflicts with OMNIROUTE_CIRCUIT_BREAKER_API_KEY_THRESHOLD=5: the degrade threshold must not exceed/,
         'with a warning naming both variables');
}

sub test_out { return $t->test_config }

$t->config("    omniroute_zone zone=o:1m;\n" . <<'EOF');
    server {
        listen 127.0.0.1:%%PORT_gw%%;
        location /v1/ { omniroute_pass _omniroute; }
    }
EOF
my ($rc, $out) = $t->test_config;
like($out, qr/invalid attempt location "_omniroute"/,
     'R-CONF-5 omniroute_pass needs a URI');

$t->done;
done_testing;
